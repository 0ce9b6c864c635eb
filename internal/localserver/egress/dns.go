package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/relay"
)

// The resolver's answers.
const (
	// dnsTTL is the TTL of every answer: the server's look-up does not say
	// the upstream's, and nothing in a sandbox should keep an answer long.
	dnsTTL = 30
	// dnsLookupTimeout bounds one look-up (below relay's round trip).
	dnsLookupTimeout = 10 * time.Second
	// dnsIdle is how long a DNS stream may wait for its next query.
	dnsIdle = 2 * time.Minute
	// maxDNSAddrs keeps every answer within a UDP message's 512 bytes,
	// AAAA records and a long name included.
	maxDNSAddrs = 8
)

// UpstreamResolver is the resolver of the proxy and the sandboxes' DNS:
// the system's when upstream is empty, else the DNS server at upstream
// (ip:port) alone, over UDP and TCP as the look-up needs.
func UpstreamResolver(upstream string) *net.Resolver {
	if upstream == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, upstream)
		},
	}
}

// CheckUpstream says what is wrong with a --dns-upstream value, or nil.
func CheckUpstream(upstream string) error {
	if upstream == "" {
		return nil
	}
	if _, err := netip.ParseAddrPort(upstream); err != nil {
		return errors.New("--dns-upstream " + upstream + " is not ip:port (a DNS server's address, e.g. 127.0.0.1:53 or [::1]:53)")
	}
	return nil
}

// ServeDNS answers the DNS queries of one stream of a container's channel
// (framed as DNS over TCP, relay.ReadDNS) until it ends.
func (p *Proxy) ServeDNS(conn net.Conn) {
	defer conn.Close()
	for {
		_ = conn.SetReadDeadline(time.Now().Add(dnsIdle))
		query, err := relay.ReadDNS(conn)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), dnsLookupTimeout)
		answer := p.answerDNS(ctx, query)
		cancel()
		if answer == nil || relay.WriteDNS(conn, answer) != nil {
			return
		}
	}
}

// answerDNS answers one query: A and AAAA through the resolver, filtered by
// the policy as the proxy's dial is; nil for what is not a DNS query.
func (p *Proxy) answerDNS(ctx context.Context, raw []byte) []byte {
	var parser dnsmessage.Parser
	header, err := parser.Start(raw)
	if err != nil || header.Response {
		return nil
	}
	questions, err := parser.AllQuestions()
	if err != nil || len(questions) != 1 || header.OpCode != 0 {
		return dnsReply(header, nil, dnsmessage.RCodeFormatError, nil)
	}
	q := questions[0]
	rcode, addrs := p.resolve(ctx, q)
	return dnsReply(header, &q, rcode, addrs)
}

// resolve looks q up and keeps the addresses the policy allows. A name
// whose every address is refused answers REFUSED, as the proxy refuses a
// connection to it: the client then fails at once and says the look-up
// was refused, where an empty answer would read as a name without
// addresses. Addresses of the other family count, so that a name with a
// public IPv4 and a refused IPv6 address answers AAAA with none, which
// resolvers that fail a name on any refused query (musl) need.
func (p *Proxy) resolve(ctx context.Context, q dnsmessage.Question) (dnsmessage.RCode, []netip.Addr) {
	if q.Class != dnsmessage.ClassINET || (q.Type != dnsmessage.TypeA && q.Type != dnsmessage.TypeAAAA) {
		return dnsmessage.RCodeNotImplemented, nil
	}
	name := q.Name.String()
	byName := p.policy.nameAllowed(name)
	if !byName && !p.policy.reachesAny() {
		return dnsmessage.RCodeRefused, nil
	}
	found, err := p.resolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return dnsmessage.RCodeNameError, nil
		}
		p.log.Info("DNS look-up failed", "name", name, "error", err)
		return dnsmessage.RCodeServerFailure, nil
	}
	var kept []netip.Addr
	allowed := false
	for _, ip := range found {
		ip = ip.Unmap()
		if !byName && !p.policy.addressAllowed(ip) {
			continue
		}
		allowed = true
		if ip.Is4() == (q.Type == dnsmessage.TypeA) && len(kept) < maxDNSAddrs {
			kept = append(kept, ip)
		}
	}
	if !allowed {
		p.log.Info("DNS refused", "name", name, "addresses", found, "reason", "the egress policy allows none of its addresses")
		return dnsmessage.RCodeRefused, nil
	}
	return dnsmessage.RCodeSuccess, kept
}

// dnsReply is the answer to the query of header: q repeated (when it
// parsed) and addrs as its records.
func dnsReply(header dnsmessage.Header, q *dnsmessage.Question, rcode dnsmessage.RCode, addrs []netip.Addr) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{
		ID: header.ID, Response: true, OpCode: header.OpCode, RCode: rcode,
		RecursionDesired: header.RecursionDesired, RecursionAvailable: true,
	})
	b.EnableCompression()
	// The builder fails only on sections out of order or names it could
	// not pack, which a parsed question never has.
	_ = b.StartQuestions()
	if q != nil {
		_ = b.Question(*q)
	}
	_ = b.StartAnswers()
	for _, ip := range addrs {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}
		if ip.Is4() {
			_ = b.AResource(rh, dnsmessage.AResource{A: ip.As4()})
		} else {
			_ = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: ip.As16()})
		}
	}
	msg, err := b.Finish()
	if err != nil {
		return nil
	}
	return msg
}
