package localserver

import (
	"net/http"
	"net/http/httputil"
	"regexp"
	"strconv"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// sandboxHost matches the first label of "<port>-<sandboxID>[-<anything>].<domain>".
var sandboxHost = regexp.MustCompile(`^([0-9]+)-([a-z0-9]+)(?:-[^.]*)?\.[^:]+(?::[0-9]+)?$`)

// sandboxTarget reports the sandbox and port a request is addressed to, by
// the E2b-Sandbox-Id and E2b-Sandbox-Port headers or by its Host.
func sandboxTarget(r *http.Request) (string, int, bool) {
	id, rawPort := r.Header.Get("E2b-Sandbox-Id"), r.Header.Get("E2b-Sandbox-Port")
	if id == "" || rawPort == "" {
		m := sandboxHost.FindStringSubmatch(r.Host)
		if m == nil {
			return "", 0, false
		}
		rawPort, id = m[1], m[2]
	}
	port, err := strconv.Atoi(rawPort)
	if err != nil {
		return id, -1, true
	}
	return id, port, true
}

// sandboxProxy forwards to one sandbox's envd over its unix socket.
type sandboxProxy struct {
	socket    string
	transport *http.Transport
	proxy     *httputil.ReverseProxy
}

func newSandboxProxy(socket string) *sandboxProxy {
	transport := envdclient.UnixSocketTransport(socket)
	transport.MaxIdleConnsPerHost = 16
	return &sandboxProxy{
		socket:    socket,
		transport: transport,
		proxy: &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.Out.URL.Scheme = "http"
				pr.Out.URL.Host = "envd"
			},
			Transport: transport,
			// Stream every byte as it comes: process output must not wait.
			FlushInterval: -1,
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				writeError(w, http.StatusBadGateway, "envd of the sandbox did not answer: %v", err)
			},
		},
	}
}

func (s *Server) proxy(w http.ResponseWriter, r *http.Request, id string, port int) {
	sb, err := s.store.Sandbox(id)
	if err != nil {
		if store.KindOf(err) == store.KindNotFound {
			// 502, as E2B's proxy answers: the SDKs read it as "the sandbox
			// was killed or timed out" (isRunning → false).
			writeError(w, http.StatusBadGateway, "sandbox '%s' not found: it was killed or timed out", id)
			return
		}
		s.internalError(w, err)
		return
	}
	if port != e2bapi.EnvdPort {
		writeError(w, http.StatusBadGateway, "port %d of sandbox '%s' is not reachable: the local server proxies only envd (port %d)", port, id, e2bapi.EnvdPort)
		return
	}
	s.mu.Lock()
	p, ok := s.proxies[id]
	if !ok || p.socket != sb.EnvdSocket {
		p = newSandboxProxy(sb.EnvdSocket)
		s.proxies[id] = p
	}
	s.mu.Unlock()
	// Let envd read the request body while it streams its answer.
	_ = http.NewResponseController(w).EnableFullDuplex()
	p.proxy.ServeHTTP(w, r)
}
