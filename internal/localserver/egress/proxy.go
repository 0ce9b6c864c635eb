package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/relay"
)

// Proxy is the egress HTTP proxy. It serves CONNECT (any TCP, as HTTPS
// clients use it) and absolute-URI requests (plain http, as apt and pip
// send them to an http_proxy); anything else is 400. It also answers the
// sandboxes' DNS queries (ServeDNS) with the resolver its dials use.
type Proxy struct {
	policy    *Policy
	resolver  *net.Resolver
	log       *slog.Logger
	forward   *httputil.ReverseProxy
	transport *http.Transport

	// afterCheck, in tests, runs when the policy allowed an address, just
	// before connect(2); an error stops the dial.
	afterCheck func(network, address string) error
}

// New returns a proxy enforcing policy that resolves names with resolver
// (UpstreamResolver).
func New(policy *Policy, resolver *net.Resolver, logger *slog.Logger) *Proxy {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{policy: policy, resolver: resolver, log: logger}
	p.transport = &http.Transport{
		Proxy:                 nil, // never chain to the host's own proxy
		DialContext:           p.dial,
		MaxIdleConns:          64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
	}
	p.forward = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = pr.In.URL
			pr.Out.Host = pr.In.Host
		},
		Transport:     p.transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.fail(w, r.Host, err)
		},
	}
	return p
}

// Close drops idle upstream connections.
func (p *Proxy) Close() { p.transport.CloseIdleConnections() }

// dial connects to addr ("host:port") if the policy allows its resolved
// address; the check runs in Control, after resolution and before
// connect(2).
func (p *Proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, rawPort, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(rawPort)
	if err != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("bad port in %q", addr)
	}
	byName := p.policy.hostAllowed(host, port)
	d := net.Dialer{
		Timeout:  30 * time.Second,
		Resolver: p.resolver,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return errNotIP
			}
			if err := p.policy.Check(ap, byName); err != nil {
				return err
			}
			if p.afterCheck != nil {
				return p.afterCheck(network, address)
			}
			return nil
		},
	}
	// Only TCP, whatever the caller says.
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		network = "tcp"
	}
	return d.DialContext(ctx, network, addr)
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		p.connect(w, r)
	case r.URL.IsAbs() && (r.URL.Scheme == "http" || r.URL.Scheme == "https") && r.URL.Host != "":
		p.log.Debug("egress request", "method", r.Method, "url", r.URL.Redacted())
		p.forward.ServeHTTP(w, r)
	default:
		http.Error(w, "this is the local E2B server's egress proxy: send CONNECT or an absolute http:// URL", http.StatusBadRequest)
	}
}

func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	target := r.Host
	if _, _, err := net.SplitHostPort(target); err != nil {
		http.Error(w, "CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	up, err := p.dial(r.Context(), "tcp", target)
	if err != nil {
		p.fail(w, target, err)
		return
	}
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		up.Close()
		return
	}
	// Bytes the client sent after its CONNECT (a TLS hello) are buffered.
	if n := buf.Reader.Buffered(); n > 0 {
		pending, _ := buf.Peek(n)
		if _, err := up.Write(pending); err != nil {
			conn.Close()
			up.Close()
			return
		}
	}
	p.log.Debug("egress tunnel", "target", target)
	relay.Pipe(conn, up)
}

// fail answers a failed dial: 403 for the policy, 502 otherwise.
func (p *Proxy) fail(w http.ResponseWriter, target string, err error) {
	var denied *DeniedError
	if errors.As(err, &denied) {
		p.log.Info("egress denied", "target", target, "address", denied.Target, "reason", denied.Reason)
		http.Error(w, denied.Error(), http.StatusForbidden)
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	http.Error(w, fmt.Sprintf("egress to %s failed: %v", target, err), http.StatusBadGateway)
}
