package relay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// echoServer listens on a loopback port and echoes every line prefixed.
func echoServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintf(c, "echo %s\n", sc.Text())
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port //nolint:forcetypeassert // a "tcp" listener's address is a *net.TCPAddr
}

func startAgent(t *testing.T, socket string, opts AgentOptions) (stop func()) {
	t.Helper()
	opts.Socket = socket
	if opts.Dial == nil {
		opts.Dial = DialLocal
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = Serve(ctx, opts); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func roundTrip(t *testing.T, c net.Conn, msg string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return line
}

func dial(t *testing.T, l *Listener, port int) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return l.Dial(ctx, port)
}

// mustEcho dials port through l and checks that msg comes back from the
// echo server; when is what the test has just done, for the failure.
func mustEcho(t *testing.T, l *Listener, port int, when, msg string) {
	t.Helper()
	c, err := dial(t, l, port)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	defer c.Close()
	if got := roundTrip(t, c, msg); got != "echo "+msg+"\n" {
		t.Errorf("%s: got %q", when, got)
	}
}

func TestRelayStreamsAndRefusal(t *testing.T) {
	port := echoServer(t)
	sock := filepath.Join(t.TempDir(), "relay.sock")
	l, err := Listen(sock, ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	startAgent(t, sock, AgentOptions{Idle: 2})

	var conns []net.Conn
	for i := range 8 { // more than the idle pool: envd refills it
		c, err := dial(t, l, port)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		conns = append(conns, c)
		if got := roundTrip(t, c, "hi"+strconv.Itoa(i)); got != "echo hi"+strconv.Itoa(i)+"\n" {
			t.Errorf("stream %d got %q", i, got)
		}
	}
	for _, c := range conns {
		c.Close()
	}

	// A port nothing listens on: a clean refusal, not a hang.
	free, _ := net.Listen("tcp", "127.0.0.1:0")
	freePort := free.Addr().(*net.TCPAddr).Port //nolint:forcetypeassert // a "tcp" listener's address is a *net.TCPAddr
	free.Close()
	_, err = dial(t, l, freePort)
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Port != freePort {
		t.Fatalf("dial of a closed port: %v, want a RefusedError", err)
	}
	if _, err := dial(t, l, 0); err == nil {
		t.Error("port 0 accepted")
	}
}

// A restarted server re-creates the socket at the same path; envd redials.
func TestRelayServerRestart(t *testing.T) {
	port := echoServer(t)
	sock := filepath.Join(t.TempDir(), "relay.sock")
	l, err := Listen(sock, ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startAgent(t, sock, AgentOptions{Idle: 2})
	c, err := dial(t, l, port)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	l.Close()

	l2, err := Listen(sock, ListenOptions{})
	if err != nil {
		t.Fatalf("listen again over the old socket: %v", err)
	}
	defer l2.Close()
	mustEcho(t, l2, port, "after restart", "again")
}

// Stale pooled connections (envd restarted) are skipped, not returned.
func TestRelaySkipsStaleConnections(t *testing.T) {
	port := echoServer(t)
	sock := filepath.Join(t.TempDir(), "relay.sock")
	l, err := Listen(sock, ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	stop := startAgent(t, sock, AgentOptions{Idle: 3})
	deadline := time.Now().Add(10 * time.Second)
	for len(l.idle) < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop() // the pooled connections die with the agent
	startAgent(t, sock, AgentOptions{Idle: 1})
	mustEcho(t, l, port, "after the agent restarted", "fresh")
}

// The peer check refuses connections; the server's Dial then times out
// with ErrNotConnected instead of using them.
func TestRelayPeerCheck(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "relay.sock")
	var checked atomic.Int32
	l, err := Listen(sock, ListenOptions{CheckPeer: func(_ context.Context, cred *syscall.Ucred) error {
		checked.Add(1)
		if int(cred.Uid) != os.Getuid() {
			t.Errorf("peer uid %d, want ours %d", cred.Uid, os.Getuid())
		}
		return errors.New("not the container's root")
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	startAgent(t, sock, AgentOptions{Idle: 1})
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := l.Dial(ctx, 1); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("dial with every peer rejected: %v, want ErrNotConnected", err)
	}
	if checked.Load() == 0 {
		t.Error("the peer check never ran")
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(p, ListenOptions{}); err == nil {
		t.Fatal("listened over a regular file")
	}
}

// A flood of connections that never say hello does not pile up: beyond
// the bound they are closed at once, and envd still gets through.
func TestRelayFloodIsBounded(t *testing.T) {
	port := echoServer(t)
	sock := filepath.Join(t.TempDir(), "relay.sock")
	l, err := Listen(sock, ListenOptions{PoolSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var silent []net.Conn
	closed := 0
	for range 50 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	for _, c := range silent {
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			closed++
		}
		c.Close()
	}
	if closed < 50-8 {
		t.Errorf("%d of 50 silent connections were closed, want all beyond the 8 pending", closed)
	}
	startAgent(t, sock, AgentOptions{Idle: 1})
	mustEcho(t, l, port, "after the silent connections", "after")
}

func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitListener(inner, 2)
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted beyond the limit")
	case <-time.After(200 * time.Millisecond):
	}
	first.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted after one closed")
	}
	second.Close()
	ln.Close()
	for range accepted {
	}
}
