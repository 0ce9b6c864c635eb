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
	"strings"
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

// connect runs an agent on one end of a pipe and opens the channel on the
// other; done is closed when the agent has returned.
func connect(t *testing.T, opts AgentOptions) (ch *Channel, done chan struct{}) {
	t.Helper()
	if opts.Dial == nil {
		opts.Dial = DialLocal
	}
	server, agentEnd := net.Pipe()
	done = make(chan struct{})
	go func() {
		defer close(done)
		if err := ServeAgent(context.Background(), agentEnd, opts); err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	ch, err := Open(t.Context(), server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close(); <-done })
	return ch, done
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

// Streams reach ports in the agent's namespace, several at once; a port
// nothing listens on is refused with the port named.
func TestChannelStreamsAndRefusal(t *testing.T) {
	port := echoServer(t)
	ch, _ := connect(t, AgentOptions{})
	var conns []net.Conn
	for i := range 3 {
		c, err := ch.Dial(t.Context(), port)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
		if got := roundTrip(t, c, fmt.Sprint("hi ", i)); got != fmt.Sprintf("echo hi %d\n", i) {
			t.Errorf("stream %d got %q", i, got)
		}
	}
	if got := roundTrip(t, conns[0], "again"); got != "echo again\n" {
		t.Errorf("first stream after others got %q", got)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port //nolint:forcetypeassert // a "tcp" listener's address is a *net.TCPAddr
	ln.Close()
	_, err = ch.Dial(t.Context(), closed)
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Port != closed || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("dial of a closed port: %v, want a RefusedError for port %d", err, closed)
	}
	if _, err := ch.Dial(t.Context(), 70000); err == nil {
		t.Error("dial of port 70000 succeeded")
	}
}

// An exec that failed writes its error where the hello should be: Open
// says what arrived.
func TestOpenReportsAFailedAgent(t *testing.T) {
	server, other := net.Pipe()
	go func() {
		_, _ = io.WriteString(other, "OCI runtime exec failed: exec: \"/.e2b/envd\": permission denied\n")
		other.Close()
	}()
	_, err := Open(t.Context(), server)
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Open: %v, want the exec's error", err)
	}
}

// DEADLINE keeps the sandbox's end in the file envd reads; 0 removes it.
func TestChannelDeadline(t *testing.T) {
	file := filepath.Join(t.TempDir(), "deadline")
	ch, _ := connect(t, AgentOptions{DeadlineFile: file})
	end := time.UnixMilli(1_900_000_000_123)
	if err := ch.SetDeadline(t.Context(), end); err != nil {
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(file); err != nil || string(raw) != "1900000000123\n" {
		t.Errorf("deadline file %q (%v)", raw, err)
	}
	if err := ch.SetDeadline(t.Context(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cleared deadline file still there: %v", err)
	}
	noFile, _ := connect(t, AgentOptions{})
	if err := noFile.SetDeadline(t.Context(), end); err == nil {
		t.Error("an agent without a deadline file accepted a deadline")
	}
}

// A connection to the agent's egress socket arrives on the server's
// Egress listener; a stale socket file of an earlier agent is replaced.
func TestChannelEgress(t *testing.T) {
	dir, err := os.MkdirTemp("", "egr") //nolint:usetesting // short: a unix socket path
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "egress.sock")
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false) //nolint:forcetypeassert // a "unix" listener
	stale.Close()
	ch, _ := connect(t, AgentOptions{EgressSocket: sock})
	go func() {
		c, err := ch.Egress().Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		_, _ = io.WriteString(c, "proxy got "+line)
	}()
	var c net.Conn
	for deadline := time.Now().Add(5 * time.Second); ; {
		if c, err = net.Dial("unix", sock); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := roundTrip(t, c, "CONNECT example.com:443"); got != "proxy got CONNECT example.com:443\n" {
		t.Errorf("egress stream got %q", got)
	}
}

// Streams beyond MaxStreams are refused, not queued without end.
func TestAgentBoundsStreams(t *testing.T) {
	port := echoServer(t)
	ch, _ := connect(t, AgentOptions{MaxStreams: 2})
	for range 2 {
		c, err := ch.Dial(t.Context(), port)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	_, err := ch.Dial(t.Context(), port)
	var refused *RefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Reason, "too many streams") {
		t.Errorf("third stream: %v, want refused as too many", err)
	}
}

// The agent returns when the server closes the channel (the exec's input
// ends), and the channel says it ended when the agent's side goes.
func TestChannelEnds(t *testing.T) {
	ch, done := connect(t, AgentOptions{})
	ch.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the agent did not return after the channel closed")
	}
	select {
	case <-ch.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the channel does not say it ended")
	}
}
