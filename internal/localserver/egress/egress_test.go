package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// target is a loopback HTTP server that counts the connections it gets.
func target(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "target saw %s %s", r.Method, r.URL.Path)
	}))
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts, &conns
}

// recorder stops every dial the policy allows before connect(2) and
// records it: tests never send a packet anywhere but loopback.
type recorder struct {
	mu       sync.Mutex
	attempts []string
	pass     bool // let allowed dials through (loopback targets only)
}

func (r *recorder) afterCheck(_, address string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = append(r.attempts, address)
	if r.pass {
		return nil
	}
	return errors.New("test: dial stopped before connect")
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.attempts...)
}

func startProxy(t *testing.T, policy *Policy, rec *recorder) *url.URL {
	t.Helper()
	p := New(policy, nil, nil)
	p.afterCheck = rec.afterCheck
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	t.Cleanup(p.Close)
	u, _ := url.Parse(hs.URL)
	return u
}

func proxied(t *testing.T, proxy *url.URL, rawURL string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	resp, err := c.Get(rawURL)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// connect sends CONNECT target to the proxy and returns the status line.
func connect(t *testing.T, proxy *url.URL, target string) string {
	t.Helper()
	c, err := net.Dial("tcp", proxy.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(line)
}

// The default policy refuses loopback, private, link-local and other
// non-public targets, by address and by a name resolving to one, before
// any dial attempt; a public address passes the policy (and is stopped by
// the recorder, so nothing leaves the machine).
func TestDefaultPolicyRefusesBeforeDialling(t *testing.T) {
	srv, conns := target(t)
	policy, err := NewPolicy("", "")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	proxy := startProxy(t, policy, rec)
	port := srv.Listener.Addr().(*net.TCPAddr).Port //nolint:forcetypeassert // a "tcp" listener's address is a *net.TCPAddr

	for _, host := range []string{
		"127.0.0.1", "localhost", "[::1]", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
		"100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "[fe80::1]", "[fc00::1]", "[::ffff:127.0.0.1]",
		"[64:ff9b::a00:1]", "198.18.0.1", "192.0.2.1",
	} {
		addr := fmt.Sprintf("%s:%d", host, port)
		if code, body := proxied(t, proxy, "http://"+addr+"/x"); code != http.StatusForbidden || !strings.Contains(body, "denied") {
			t.Errorf("GET http://%s through the proxy = %d %q, want 403", addr, code, body)
		}
		if line := connect(t, proxy, addr); !strings.Contains(line, "403") {
			t.Errorf("CONNECT %s = %q, want 403", addr, line)
		}
	}
	if got := rec.list(); len(got) != 0 {
		t.Errorf("dial attempts past the policy: %v", got)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the loopback target received %d connections", n)
	}

	// A public address is allowed by the policy: the recorder sees it.
	if line := connect(t, proxy, "93.184.215.14:443"); !strings.Contains(line, "502") {
		t.Errorf("CONNECT to a public address stopped by the recorder = %q, want 502", line)
	}
	if got := rec.list(); len(got) != 1 || got[0] != "93.184.215.14:443" {
		t.Errorf("attempts = %v, want the one public address", got)
	}
}

// The allowlist opens a loopback server explicitly; mode none refuses
// the rest; the server's own listener stays refused whatever is allowed.
func TestAllowlistAndOwnPorts(t *testing.T) {
	srv, conns := target(t)
	other, otherConns := target(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port //nolint:forcetypeassert // a "tcp" listener's address is a *net.TCPAddr
	policy, err := NewPolicy(ModeNone, fmt.Sprintf("127.0.0.1:%d, 10.0.0.0/8", port))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{pass: true}
	proxy := startProxy(t, policy, rec)
	if code, body := proxied(t, proxy, srv.URL+"/allowed"); code != 200 || body != "target saw GET /allowed" {
		t.Errorf("allowed loopback target = %d %q", code, body)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("allowed target got %d connections, want 1", n)
	}
	if code, _ := proxied(t, proxy, other.URL+"/"); code != http.StatusForbidden {
		t.Errorf("another loopback port = %d, want 403", code)
	}
	rec.pass = false
	if code, _ := proxied(t, proxy, "http://93.184.215.14/"); code != http.StatusForbidden {
		t.Errorf("a public address with --egress none = %d, want 403", code)
	}
	if otherConns.Load() != 0 {
		t.Error("the other loopback server was reached")
	}

	// The server's own port: refused even when allowlisted.
	ownPolicy, _ := NewPolicy(ModePublic, other.Listener.Addr().String())
	ownPolicy.DenyListener(&net.TCPAddr{IP: net.IPv4zero, Port: other.Listener.Addr().(*net.TCPAddr).Port}) //nolint:forcetypeassert // a "tcp" listener's address is a *net.TCPAddr
	proxy = startProxy(t, ownPolicy, rec)
	before := len(rec.list())
	if code, body := proxied(t, proxy, other.URL+"/own"); code != http.StatusForbidden || !strings.Contains(body, "own port") {
		t.Errorf("the server's own port = %d %q", code, body)
	}
	if len(rec.list()) != before {
		t.Error("the server's own port was dialled")
	}
}

func TestNewPolicyRejectsBadEntries(t *testing.T) {
	for _, bad := range []string{"nope", "host:0", "host:99999", "/8", "[::1"} {
		if _, err := NewPolicy("", bad); err == nil {
			t.Errorf("allowlist %q accepted", bad)
		}
	}
	if _, err := NewPolicy("everything", ""); err == nil {
		t.Error("mode everything accepted")
	}
	p, err := NewPolicy("public", "registry.internal:5000,192.168.0.10:80,fd00::/8,10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if !p.hostAllowed("Registry.Internal.", 5000) || p.hostAllowed("registry.internal", 5001) {
		t.Error("host allowlist matching")
	}
}

// Plain-http forwarding and CONNECT both carry bytes both ways.
func TestConnectTunnel(t *testing.T) {
	srv, _ := target(t)
	policy, _ := NewPolicy(ModeNone, srv.Listener.Addr().String())
	proxy := startProxy(t, policy, &recorder{pass: true})
	c, err := net.Dial("tcp", proxy.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	addr := srv.Listener.Addr().String()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\nGET /tunnelled HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr, addr, addr)
	br := bufio.NewReader(c)
	line, _ := br.ReadString('\n')
	if !strings.Contains(line, "200") {
		t.Fatalf("CONNECT answer %q", line)
	}
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if l == "\r\n" {
			break
		}
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "target saw GET /tunnelled" {
		t.Errorf("through the tunnel: %q", body)
	}
}
