package relay

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
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

// An agent of version 1 (a kept sandbox's older envd) opens egress streams
// without a kind line: every one of them arrives on Egress as it is.
func TestChannelVersion1AgentStreamsAreEgress(t *testing.T) {
	server, agentEnd := net.Pipe()
	go func() {
		if _, err := io.WriteString(agentEnd, helloV1+"\n"); err != nil {
			return
		}
		sess, err := yamux.Server(agentEnd, muxConfig())
		if err != nil {
			return
		}
		s, err := sess.OpenStream()
		if err != nil {
			return
		}
		_, _ = io.WriteString(s, "CONNECT example.com:443 HTTP/1.1\n")
	}()
	ch, err := Open(t.Context(), server)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	s, err := ch.Egress().Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	if line, err := readLine(s); err != nil || line != "CONNECT example.com:443 HTTP/1.1" {
		t.Errorf("egress stream of a version 1 agent: %q (%v)", line, err)
	}
}
