package attach

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

// Paths inside every container.
const (
	// EnvdDir is the envd volume (volume.go), mounted read-only: nothing in
	// the container can replace envd.
	EnvdDir  = "/.e2b"
	EnvdPath = EnvdDir + "/envd"
	// RunDir is a tmpfs only root may enter, where the channel agent keeps
	// the egress socket and the sandbox's end for envd. Not committed with
	// the container's files.
	RunDir            = "/run/e2b"
	egressSocketPath  = RunDir + "/egress.sock"
	deadlineFilePath  = RunDir + "/deadline"
	hostNetEnvdSocket = RunDir + "/envd.sock"
)

// EnvdCommand is a container's entrypoint: envd on TCP 49983 of the
// container's own network namespace (as on E2B), reached by the server
// only through the container's channel, and offering the egress proxy
// when there is one. With host networking it listens on a socket of the
// container's own file system instead, so that containers do not fight
// over the host's port 49983. The channel agent is started with the same
// flags and --channel.
func EnvdCommand(network string, egress bool) []string {
	var cmd []string
	if network == engine.NetworkHost {
		cmd = []string{EnvdPath, "envd", "--listen", "unix://" + hostNetEnvdSocket}
	} else {
		cmd = []string{EnvdPath, "envd", "--listen", fmt.Sprintf("0.0.0.0:%d", envd.Port)}
		if egress {
			cmd = append(cmd, "--egress", "unix://"+egressSocketPath, "--egress-listen", fmt.Sprintf("127.0.0.1:%d", envd.EgressProxyPort))
		}
	}
	return append(cmd, "--deadline-file", deadlineFilePath)
}

// Envd is the container's envd client, the one of its attachment: it
// dials through the channel and sends the access token last handed to
// Init (or SetToken) with every request.
func (a *Attachment) Envd() *client.Client { return a.envd }

// SetToken makes every later envd request carry token (none when empty):
// a build container's, known before envd starts, or a sandbox's, before
// its Init.
func (a *Attachment) SetToken(token string) {
	a.mu.Lock()
	a.token = token
	a.mu.Unlock()
}

// Init hands the container's envd its token, user, workdir and env
// (envd's /init); the token goes with every request from then on. The
// container is no longer warm: its user may run anything in it.
func (a *Attachment) Init(ctx context.Context, req client.InitRequest) error {
	a.mu.Lock()
	a.warm = false
	a.mu.Unlock()
	a.SetToken(req.AccessToken)
	return a.envd.Init(ctx, req)
}

// newEnvdClient is the client of the envd of a's container, through its
// channel. The token is a's current one, added by the transport: it
// changes when a pooled sandbox is handed out, the client does not.
func newEnvdClient(a *Attachment) *client.Client {
	transport := &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return a.Dial(ctx, envd.Port) },
		DisableCompression:  true,
		MaxIdleConnsPerHost: 8,
	}
	hc := &http.Client{Transport: tokenTransport{base: transport, a: a}}
	// The host name is never resolved: every connection goes through the
	// channel.
	c, err := client.New(client.Config{BaseURL: "http://localhost", HTTPClient: hc})
	if err != nil {
		panic(fmt.Sprintf("envd client for a fixed loopback URL: %v", err)) // cannot happen
	}
	return c
}

// tokenTransport adds the attachment's access token to every request.
type tokenTransport struct {
	base http.RoundTripper
	a    *Attachment
}

func (t tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.a.mu.Lock()
	token := t.a.token
	t.a.mu.Unlock()
	if token != "" {
		req = req.Clone(req.Context())
		req.Header.Set(envd.HeaderAccessToken, token)
	}
	return t.base.RoundTrip(req)
}
