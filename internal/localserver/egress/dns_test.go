package egress

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/relay"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// askDNS sends one query for name and type on a DNS stream the proxy
// serves, as the channel agent does, and returns the answer's code and
// addresses.
func askDNS(t *testing.T, p *Proxy, name string, qtype dnsmessage.Type) (dnsmessage.RCode, []netip.Addr) {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: qtype, Class: dnsmessage.ClassINET})
	query, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	client, server := net.Pipe()
	defer client.Close()
	go p.ServeDNS(server)
	_ = client.SetDeadline(time.Now().Add(20 * time.Second))
	if err := relay.WriteDNS(client, query); err != nil {
		t.Fatal(err)
	}
	raw, err := relay.ReadDNS(client)
	if err != nil {
		t.Fatal(err)
	}
	var parser dnsmessage.Parser
	h, err := parser.Start(raw)
	if err != nil || h.ID != 7 || !h.Response {
		t.Fatalf("answer header %+v (%v)", h, err)
	}
	if err := parser.SkipAllQuestions(); err != nil {
		t.Fatal(err)
	}
	answers, err := parser.AllAnswers()
	if err != nil {
		t.Fatal(err)
	}
	var addrs []netip.Addr
	for _, a := range answers {
		switch r := a.Body.(type) {
		case *dnsmessage.AResource:
			addrs = append(addrs, netip.AddrFrom4(r.A))
		case *dnsmessage.AAAAResource:
			addrs = append(addrs, netip.AddrFrom16(r.AAAA))
		}
	}
	return h.RCode, addrs
}

// The sandboxes' DNS answers through the upstream resolver and keeps to
// the policy: names of refused addresses are REFUSED, refused addresses
// are dropped beside allowed ones, names allowlisted by name pass, and
// under --egress none with nothing allowed nothing is looked up.
func TestDNSUnderThePolicy(t *testing.T) {
	ip := netip.MustParseAddr
	upstream := testutil.DNSServer(t, map[string][]netip.Addr{
		"allowed.test": {ip("127.0.0.1")},
		"refused.test": {ip("127.0.0.2")},
		"mixed.test":   {ip("127.0.0.1"), ip("10.1.2.3"), ip("::1")},
		"byname.test":  {ip("10.9.9.9")},
	})
	policy, err := NewPolicy(ModePublic, "127.0.0.1:8080,byname.test:443")
	if err != nil {
		t.Fatal(err)
	}
	p := New(policy, UpstreamResolver(upstream), nil)
	A, AAAA := dnsmessage.TypeA, dnsmessage.TypeAAAA
	for _, tc := range []struct {
		name  string
		qtype dnsmessage.Type
		rcode dnsmessage.RCode
		addrs []netip.Addr
	}{
		{"allowed.test", A, dnsmessage.RCodeSuccess, []netip.Addr{ip("127.0.0.1")}},
		{"allowed.test", AAAA, dnsmessage.RCodeSuccess, nil},
		{"refused.test", A, dnsmessage.RCodeRefused, nil},
		{"refused.test", AAAA, dnsmessage.RCodeRefused, nil},
		{"mixed.test", A, dnsmessage.RCodeSuccess, []netip.Addr{ip("127.0.0.1")}},
		{"mixed.test", AAAA, dnsmessage.RCodeSuccess, nil},
		{"byname.test", A, dnsmessage.RCodeSuccess, []netip.Addr{ip("10.9.9.9")}},
		{"missing.test", A, dnsmessage.RCodeNameError, nil},
		{"allowed.test", dnsmessage.TypeMX, dnsmessage.RCodeNotImplemented, nil},
	} {
		rcode, addrs := askDNS(t, p, tc.name, tc.qtype)
		if rcode != tc.rcode || !slices.Equal(addrs, tc.addrs) {
			t.Errorf("%s %s: %s %v, want %s %v", tc.name, tc.qtype, rcode, addrs, tc.rcode, tc.addrs)
		}
	}

	// The proxy resolves through the same upstream: a name of an allowed
	// address is dialled, one of a refused address is not.
	rec := &recorder{}
	p.afterCheck = rec.afterCheck
	if _, err := p.dial(t.Context(), "tcp", "allowed.test:8080"); err == nil || len(rec.list()) != 1 || rec.list()[0] != "127.0.0.1:8080" {
		t.Errorf("dial of allowed.test: %v, attempts %v", err, rec.list())
	}
	if _, err := p.dial(t.Context(), "tcp", "refused.test:8080"); err == nil || len(rec.list()) != 1 {
		t.Errorf("dial of refused.test: %v, attempts %v", err, rec.list())
	}

	off, err := NewPolicy(ModeNone, "")
	if err != nil {
		t.Fatal(err)
	}
	if rcode, _ := askDNS(t, New(off, UpstreamResolver(upstream), nil), "allowed.test", A); rcode != dnsmessage.RCodeRefused {
		t.Errorf("under --egress none: %s, want REFUSED", rcode)
	}
}
