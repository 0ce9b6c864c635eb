package testutil

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// DNSServer serves names (lower case, no trailing dot) to their addresses
// on a loopback port the OS picked, over UDP and TCP, until t ends, and
// returns its address (ip:port): the upstream a test gives the local
// server, so that no look-up of a test reaches the host's resolver. A name
// not listed is NXDOMAIN.
func DNSServer(t testing.TB, names map[string][]netip.Addr) string {
	t.Helper()
	addr, stop, err := ServeDNS(names)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr
}

// ServeDNS is DNSServer for a server that outlives any one test (acctest's
// shared local server): stop ends it.
func ServeDNS(names map[string][]netip.Addr) (addr string, stop func(), err error) {
	pc, ln, err := listenUDPAndTCP()
	if err != nil {
		return "", nil, err
	}
	go func() {
		buf := make([]byte, 0xffff)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if answer := dnsAnswer(names, buf[:n]); answer != nil {
				_, _ = pc.WriteTo(answer, from)
			}
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					var n uint16
					if binary.Read(c, binary.BigEndian, &n) != nil {
						return
					}
					query := make([]byte, n)
					if _, err := io.ReadFull(c, query); err != nil {
						return
					}
					answer := dnsAnswer(names, query)
					if answer == nil {
						return
					}
					if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(answer))), answer...)); err != nil { //nolint:gosec // an answer of a few records
						return
					}
				}
			}()
		}
	}()
	return pc.LocalAddr().String(), func() { pc.Close(); ln.Close() }, nil
}

func dnsAnswer(names map[string][]netip.Addr, query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	addrs, found := names[strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))]
	rcode := dnsmessage.RCodeSuccess
	if !found {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RCode: rcode})
	_ = b.StartQuestions()
	_ = b.Question(q)
	_ = b.StartAnswers()
	for _, a := range addrs {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}
		switch {
		case a.Is4() && q.Type == dnsmessage.TypeA:
			_ = b.AResource(rh, dnsmessage.AResource{A: a.As4()})
		case a.Is6() && q.Type == dnsmessage.TypeAAAA:
			_ = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
	}
	msg, err := b.Finish()
	if err != nil {
		return nil
	}
	return msg
}

// listenUDPAndTCP listens on one loopback port the OS picked for UDP, over
// UDP and TCP. The port is free for UDP, not always for TCP (another
// test's connection may hold it), so a port taken for TCP is given back
// and another picked.
func listenUDPAndTCP() (net.PacketConn, net.Listener, error) {
	for tries := 0; ; tries++ {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if !errors.Is(err, syscall.EADDRINUSE) || tries == 20 {
			return nil, nil, err
		}
	}
}
