// Package egress is the local server's outbound gate for sandboxes and
// build steps: an HTTP(S) proxy (CONNECT, and absolute-URI forwarding for
// plain http) that dials only what the Policy allows. Containers have no
// network of their own beyond loopback; envd offers this proxy on the
// sandbox's loopback and points HTTP_PROXY and friends at it.
//
// The policy is checked on the resolved address at dial time
// (net.Dialer.Control), after DNS, so a name that resolves to a forbidden
// address is refused as the address itself would be, and before
// connect(2), so nothing is ever sent to a refused address.
package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
)

// Modes of a Policy.
const (
	// ModePublic allows the public internet: every unicast address that is
	// not loopback, private, link-local, shared (CGNAT), reserved or
	// documentation space.
	ModePublic = "public"
	// ModeNone allows nothing but the allowlist.
	ModeNone = "none"
)

// DeniedError is a refusal by the policy.
type DeniedError struct {
	Target string
	Reason string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("egress to %s is denied: %s", e.Target, e.Reason)
}

// Policy decides which addresses sandboxes may reach. The zero value
// denies everything.
type Policy struct {
	mode  string
	nets  []netip.Prefix   // allowed, any port
	addrs []netip.AddrPort // allowed ip:port
	hosts map[string]bool  // allowed "name:port", lower-case

	mu  sync.Mutex
	own []netip.AddrPort // the server's own listeners: never reachable
}

// NewPolicy builds a policy from a mode (public or none) and an allowlist
// of comma-separated entries: a CIDR or an IP (any port), ip:port,
// [v6]:port, or name:port (the name as the client asks for it; its
// addresses are then allowed whatever they are).
func NewPolicy(mode, allow string) (*Policy, error) {
	p := &Policy{hosts: map[string]bool{}}
	switch mode {
	case "", ModePublic:
		p.mode = ModePublic
	case ModeNone:
		p.mode = ModeNone
	default:
		return nil, fmt.Errorf("egress mode %q is not one of public, none", mode)
	}
	for _, raw := range strings.Split(allow, ",") {
		e := strings.TrimSpace(raw)
		if e == "" {
			continue
		}
		if pfx, err := netip.ParsePrefix(e); err == nil {
			p.nets = append(p.nets, pfx.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(e); err == nil {
			p.nets = append(p.nets, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			continue
		}
		if ap, err := netip.ParseAddrPort(e); err == nil {
			p.addrs = append(p.addrs, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
			continue
		}
		host, port, err := net.SplitHostPort(e)
		if err != nil || host == "" || strings.ContainsAny(host, "/[]") {
			return nil, fmt.Errorf("egress allowlist entry %q is not a CIDR, an IP, ip:port or host:port", e)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("egress allowlist entry %q has no valid port", e)
		}
		p.hosts[strings.ToLower(strings.TrimSuffix(host, "."))+":"+port] = true
	}
	return p, nil
}

// String describes the policy for logs.
func (p *Policy) String() string {
	var allow []string
	for _, n := range p.nets {
		allow = append(allow, n.String())
	}
	for _, a := range p.addrs {
		allow = append(allow, a.String())
	}
	for h := range p.hosts {
		allow = append(allow, h)
	}
	if len(allow) == 0 {
		return p.mode
	}
	return p.mode + " + allow " + strings.Join(allow, ",")
}

// DenyListener marks one of the server's own listeners: it stays out of
// reach whatever the allowlist says. An unspecified address (0.0.0.0)
// covers every local address on its port.
func (p *Policy) DenyListener(addr net.Addr) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return
	}
	ip, _ := netip.AddrFromSlice(tcp.IP)
	p.mu.Lock()
	p.own = append(p.own, netip.AddrPortFrom(ip.Unmap(), uint16(tcp.Port))) //nolint:gosec // a TCP port is 0 to 65535
	p.mu.Unlock()
}

// hostAllowed reports whether name:port is on the allowlist by name.
func (p *Policy) hostAllowed(host string, port int) bool {
	return p.hosts[strings.ToLower(strings.TrimSuffix(host, "."))+":"+strconv.Itoa(port)]
}

// nameAllowed reports whether name is on the allowlist by name, on any
// port: a DNS answer has no port.
func (p *Policy) nameAllowed(name string) bool {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	for h := range p.hosts {
		if host, _, _ := net.SplitHostPort(h); host == name {
			return true
		}
	}
	return false
}

// reachesAny reports whether the policy allows any address at all: under
// --egress none with an empty allowlist it allows none, and names need not
// be looked up.
func (p *Policy) reachesAny() bool {
	return p.mode == ModePublic || len(p.nets)+len(p.addrs)+len(p.hosts) > 0
}

// addressAllowed reports whether the policy allows ip on some port, as a
// DNS answer may carry it: public under public, or on the allowlist (an
// ip:port entry allows its address here, its port at the proxy).
func (p *Policy) addressAllowed(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, n := range p.nets {
		if n.Contains(ip) {
			return true
		}
	}
	for _, a := range p.addrs {
		if a.Addr() == ip {
			return true
		}
	}
	return p.mode == ModePublic && forbidden(ip) == ""
}

// Check decides for a resolved address. byName is whether the name the
// client asked for is allowlisted.
func (p *Policy) Check(ap netip.AddrPort, byName bool) error {
	ip := ap.Addr().Unmap()
	target := netip.AddrPortFrom(ip, ap.Port()).String()
	if p.mode == "" {
		return &DeniedError{Target: target, Reason: "no egress policy"}
	}
	p.mu.Lock()
	own := p.own
	p.mu.Unlock()
	for _, o := range own {
		if o.Port() == ap.Port() && (ip.IsLoopback() || ip.IsUnspecified() || o.Addr().IsUnspecified() || o.Addr() == ip) {
			return &DeniedError{Target: target, Reason: "it is the local server's own port"}
		}
	}
	if byName || p.explicit(ip, ap.Port()) {
		return nil
	}
	if p.mode == ModeNone {
		return &DeniedError{Target: target, Reason: "egress is off (--egress none) and the address is not on --egress-allow"}
	}
	if reason := forbidden(ip); reason != "" {
		return &DeniedError{Target: target, Reason: reason + " addresses are not public internet (allow them with --egress-allow)"}
	}
	return nil
}

func (p *Policy) explicit(ip netip.Addr, port uint16) bool {
	for _, n := range p.nets {
		if n.Contains(ip) {
			return true
		}
	}
	for _, a := range p.addrs {
		if a.Addr() == ip && a.Port() == port {
			return true
		}
	}
	return false
}

// special are the ranges that are not public internet beyond what
// netip's predicates cover.
var special = []struct {
	pfx  netip.Prefix
	name string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\""},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("2002::/16"), "6to4"},
}

// forbidden names the kind of a non-public address, or "".
func forbidden(ip netip.Addr) string {
	switch {
	case !ip.IsValid():
		return "invalid"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	case ip.IsPrivate():
		return "private"
	case !ip.IsGlobalUnicast():
		return "non-unicast"
	}
	for _, s := range special {
		if s.pfx.Contains(ip) {
			return s.name
		}
	}
	return ""
}

// errNotIP is a dial address Control cannot parse (never expected).
var errNotIP = errors.New("egress: dial address is not ip:port")
