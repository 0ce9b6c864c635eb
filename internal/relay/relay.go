// Package relay is the channel between the local server and one of its
// containers, carried by the Docker engine itself: the server starts
// `envd --channel` in the container through the engine's exec API and
// speaks to it over that process's standard input and output, multiplexed
// with yamux. Nothing travels through the host's file system, so the
// server works with any engine it can reach (a local socket, Docker
// Desktop's VM, a remote engine over TCP).
//
// Streams the server opens reach ports in the container's own network
// namespace; streams the container opens carry its egress proxy traffic
// and its DNS queries to the server. Each server-opened stream starts with
// one request line and one answer line, "\n"-terminated:
//
//	server → agent: "CONNECT <port>"   a stream to 127.0.0.1:<port> in the container
//	server → agent: "DEADLINE <ms>"    the sandbox's end (Unix ms; 0: none)
//	agent  → server: "OK" | "REFUSED <reason>"
//
// then, after OK to CONNECT, the raw bytes of the stream in both
// directions. Each agent-opened stream starts with one line naming its
// kind, with no answer:
//
//	agent → server: "EGRESS"   then a connection to the egress proxy (HTTP)
//	agent → server: "DNS"      then DNS queries and answers, framed as DNS over TCP
//
// Before the multiplexing starts the agent writes one line, its version
// "E2B-CHANNEL/2", so that the server tells a started agent from an exec
// that failed (whose error text arrives on the same stream). An agent of
// version 1 (a kept sandbox's older envd) opens egress streams only, with
// no kind line.
package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

const (
	hello = "E2B-CHANNEL/2"
	// helloV1 is the hello of agents before DNS: their every stream is egress.
	helloV1     = "E2B-CHANNEL/1"
	maxLine     = 512
	handshakeTO = 10 * time.Second
)

// The kinds of the streams the agent opens.
const (
	kindEgress = "EGRESS"
	kindDNS    = "DNS"
)

// RefusedError is the agent's answer that nothing accepted a connection on
// the port inside the container.
type RefusedError struct {
	Port   int
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("nothing accepts connections on port %d in the sandbox (%s)", e.Port, e.Reason)
}

// readLine reads one "\n"-terminated line byte by byte, so that nothing of
// the stream that follows is consumed.
func readLine(r io.Reader) (string, error) {
	var buf [1]byte
	var line []byte
	for len(line) < maxLine {
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			return "", err
		}
		if buf[0] == '\n' {
			return string(line), nil
		}
		line = append(line, buf[0])
	}
	return "", errors.New("relay: protocol line too long")
}

// muxConfig is yamux's configuration on both ends. No keep-alive: a
// frozen (paused) container must not lose its channel, and a dead agent
// ends the exec stream, which ends the session. Streams get an 8 MiB
// window: a round trip through the engine's exec streams takes
// milliseconds, and 256 KiB per round trip held uploads to a fraction of
// what the engine carries.
func muxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.EnableKeepAlive = false
	c.MaxStreamWindowSize = 8 << 20
	c.LogOutput = io.Discard
	return c
}

// closeWriter is what TCP and unix connections have to half-close (a
// yamux stream's Close is its half-close).
type closeWriter interface{ CloseWrite() error }

// Pipe copies both ways until both directions ended, half-closing each
// side when the other stops sending, then closes both.
func Pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	one := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(closeWriter); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	go one(a, b)
	go one(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

// DialLocal dials port on the loopback of the caller's network namespace:
// 127.0.0.1, then ::1 for servers that listen on IPv6 only.
func DialLocal(ctx context.Context, port int) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err == nil {
		return c, nil
	}
	if c6, err6 := d.DialContext(ctx, "tcp6", net.JoinHostPort("::1", strconv.Itoa(port))); err6 == nil {
		return c6, nil
	}
	return nil, err
}
