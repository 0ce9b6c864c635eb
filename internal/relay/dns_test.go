package relay

import (
	"bytes"
	"net"
	"testing"
	"time"
)

// freeLoopbackAddr is a 127.0.0.1 port the OS picked and let go again.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// DNS queries to the agent's address, over UDP and over TCP, arrive on the
// server's DNS listener framed as DNS over TCP, and the server's answers
// reach their senders; egress streams still arrive on Egress.
func TestChannelDNS(t *testing.T) {
	addr := freeLoopbackAddr(t)
	ch, _ := connect(t, AgentOptions{DNSListen: addr})
	go func() {
		for {
			s, err := ch.DNS().Accept()
			if err != nil {
				return
			}
			go func() {
				defer s.Close()
				for {
					q, err := ReadDNS(s)
					if err != nil {
						return
					}
					if WriteDNS(s, append([]byte("answer to "), q...)) != nil {
						return
					}
				}
			}()
		}
	}()

	udp, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	_ = udp.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := udp.Write([]byte("q1")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	n, err := udp.Read(buf)
	if err != nil || string(buf[:n]) != "answer to q1" {
		t.Errorf("UDP answer %q (%v)", buf[:n], err)
	}

	tcp, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	_ = tcp.SetDeadline(time.Now().Add(10 * time.Second))
	for _, q := range []string{"q2", "q3"} {
		if err := WriteDNS(tcp, []byte(q)); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadDNS(tcp); err != nil || !bytes.Equal(got, []byte("answer to "+q)) {
			t.Errorf("TCP answer %q (%v)", got, err)
		}
	}
}
