package api

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/relay"
)

// sandboxHost matches the first label of "<port>-<sandboxID>[-<anything>].<domain>".
var sandboxHost = regexp.MustCompile(`^([0-9]+)-([a-z0-9]+)(?:-[^.]*)?\.[^:]+(?::[0-9]+)?$`)

// sandboxTarget reports the sandbox and port a request is addressed to, by
// the E2b-Sandbox-Id and E2b-Sandbox-Port headers or by its Host.
func sandboxTarget(r *http.Request) (string, int, bool) {
	id, rawPort := r.Header.Get(envd.HeaderSandboxID), r.Header.Get(envd.HeaderSandboxPort)
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

// sandboxProxy forwards to the ports of one sandbox through the engine's
// relay: envd's 49983, or any port a sandbox process listens on, as E2B's
// edge proxy does. The Host header is passed on unchanged.
type sandboxProxy struct {
	transport *http.Transport
	proxy     *httputil.ReverseProxy
}

// newSandboxProxy proxies to sandbox sandboxID, answering its failures with fail.
func newSandboxProxy(eng Dialer, sandboxID string, fail func(http.ResponseWriter, error)) *sandboxProxy {
	transport := &http.Transport{
		// addr is "127.0.0.1:<port>", set by Rewrite below; nothing is
		// resolved or dialled on the host.
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			_, rawPort, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			port, err := strconv.Atoi(rawPort)
			if err != nil {
				return nil, err
			}
			return eng.DialSandbox(ctx, sandboxID, port)
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &sandboxProxy{
		transport: transport,
		proxy: &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				_, port, _ := sandboxTarget(pr.In)
				pr.Out.URL.Scheme = "http"
				pr.Out.URL.Host = "127.0.0.1:" + strconv.Itoa(port)
				pr.Out.Host = pr.In.Host
			},
			Transport: transport,
			// Stream every byte as it comes: process output must not wait.
			FlushInterval: -1,
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				_, port, _ := sandboxTarget(r)
				fail(w, unreachable(sandboxID, port, err))
			},
		},
	}
}

// unreachable is the 502 answer to traffic the sandbox's port did not take.
func unreachable(sandboxID string, port int, err error) error {
	var refused *relay.RefusedError
	switch {
	case errors.As(err, &refused) && port == envd.Port:
		return failure.New(failure.Unreachable, "envd of sandbox '%s' does not accept connections: %v", sandboxID, err)
	case errors.As(err, &refused):
		return failure.New(failure.Unreachable, "The sandbox is running but port is not open: nothing listens on port %d in sandbox '%s'", port, sandboxID)
	case errors.Is(err, engine.ErrPortNotRelayed):
		return failure.New(failure.Unreachable, "port %d of sandbox '%s' is not reachable through the proxy: %v", port, sandboxID, err)
	default:
		return failure.New(failure.Unreachable, "port %d of sandbox '%s' did not answer: %v", port, sandboxID, err)
	}
}

func (s *sandboxHandlers) proxy(w http.ResponseWriter, r *http.Request, id string, port int) error {
	if err := s.sandboxes.Reach(r.Context(), id); err != nil {
		return err
	}
	if port < 1 || port > 65535 {
		return failure.New(failure.Invalid, "port %d of sandbox '%s' is not a valid port", port, id)
	}
	p := s.proxies.of(id)
	// Sandbox traffic is long-lived (process streams, WebSockets): no read
	// deadline beyond the idle and header bounds of the listener.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	// Let the sandbox read the request body while it streams its answer.
	_ = rc.EnableFullDuplex()
	p.proxy.ServeHTTP(w, r)
	// Full duplex, net/http drains what the sandbox left unread only after
	// the handler, and then reads the connection twice at once ("invalid
	// concurrent Body.Read call", golang/go#68560): drain it here.
	_ = r.Body.Close()
	return nil
}

// Proxies are the proxies to the sandboxes traffic went to, one each, so
// that a sandbox's connections are reused and dropped when it stops.
type Proxies struct {
	dialer    Dialer
	log       *slog.Logger
	mu        sync.Mutex
	bySandbox map[string]*sandboxProxy
}

// NewProxies makes the proxies, which reach the sandboxes through dialer.
func NewProxies(dialer Dialer, log *slog.Logger) *Proxies {
	return &Proxies{dialer: dialer, log: log, bySandbox: map[string]*sandboxProxy{}}
}

// of is the proxy to sandbox id.
func (ps *Proxies) of(id string) *sandboxProxy {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.bySandbox[id]
	if !ok {
		p = newSandboxProxy(ps.dialer, id, func(w http.ResponseWriter, err error) { writeFailure(ps.log, w, err) })
		ps.bySandbox[id] = p
	}
	return p
}

// Drop closes the connections to a sandbox that was stopped.
func (ps *Proxies) Drop(sandboxID string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p, ok := ps.bySandbox[sandboxID]; ok {
		p.transport.CloseIdleConnections()
		delete(ps.bySandbox, sandboxID)
	}
}

// Close closes the connections to every sandbox.
func (ps *Proxies) Close() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for id, p := range ps.bySandbox {
		p.transport.CloseIdleConnections()
		delete(ps.bySandbox, id)
	}
}
