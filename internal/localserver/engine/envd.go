package engine

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/server"
)

// EnvdVersion is the envd protocol version of the daemon we put into
// containers; builds record it and sandboxes report it.
const EnvdVersion = server.Version

// envdConn talks to one container's envd through the container's relay.
type envdConn struct {
	token string
	c     *client.Client
}

// newEnvdConn prepares a client for the envd that dial reaches, sending
// token (none when empty) with every request; init hands the same token
// to envd, which requires it from then on.
func newEnvdConn(dial func(ctx context.Context) (net.Conn, error), token string) *envdConn {
	transport := &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableCompression:  true,
		MaxIdleConnsPerHost: 8,
	}
	hc := &http.Client{Transport: transport}
	// The host name is never resolved: every connection goes through dial.
	c, err := client.New(client.Config{BaseURL: "http://localhost", AccessToken: token, HTTPClient: hc})
	if err != nil {
		panic(fmt.Sprintf("envd client for a fixed loopback URL: %v", err)) // cannot happen
	}
	return &envdConn{token: token, c: c}
}

func (e *envdConn) health(ctx context.Context) error { return e.c.Health(ctx) }

// init secures envd with the connection's token and sets the defaults of
// later processes.
func (e *envdConn) init(ctx context.Context, user, workdir string, env map[string]string) error {
	return e.c.Init(ctx, client.InitRequest{EnvVars: env, AccessToken: e.token, DefaultUser: user, DefaultWorkdir: workdir})
}

// run runs a program (not a shell string) to completion.
func (e *envdConn) run(ctx context.Context, req client.RunRequest) (*client.RunResult, error) {
	return e.c.Run(ctx, req)
}

func (e *envdConn) upload(ctx context.Context, path string, body io.Reader) error {
	return e.c.Upload(ctx, path, "root", body)
}
