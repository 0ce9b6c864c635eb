// Package relay connects the local server to ports inside a sandbox
// without the server ever dialling anything the sandbox controls.
//
// The server listens on a unix socket in a host directory that is mounted
// read-only into the container; envd, inside the sandbox's own network
// namespace, keeps a small pool of connections dialled out to that socket.
// When the server wants a stream to port N of the sandbox it takes a pooled
// connection and names the port; envd dials 127.0.0.1:N inside its
// namespace and pipes bytes both ways. Whoever connects to the socket from
// inside is the sandbox itself, so a process that impersonates envd only
// ever sees the sandbox's own traffic.
//
// The protocol, one stream per unix connection, in lines ending in "\n":
//
//	envd   → server: "E2B-RELAY/1"                 once connected
//	server → envd:   "CONNECT <port>"              when the server needs a stream
//	envd   → server: "OK" | "REFUSED <reason>"     after dialling the port
//
// then, after OK, the raw bytes of the stream in both directions.
package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	hello       = "E2B-RELAY/1"
	maxLine     = 512
	handshakeTO = 10 * time.Second
)

// RefusedError is envd's answer that nothing accepted a connection on the
// port inside the sandbox.
type RefusedError struct {
	Port   int
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("nothing accepts connections on port %d in the sandbox (%s)", e.Port, e.Reason)
}

// ErrNotConnected means no envd connection became available in time:
// envd is not running, still starting, or cannot reach the relay socket.
var ErrNotConnected = errors.New("envd is not connected to the relay")

// ErrClosed is returned by Dial after Close.
var ErrClosed = errors.New("relay closed")

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

// ListenOptions configure Listen.
type ListenOptions struct {
	// PoolSize bounds the idle envd connections kept (default 64); beyond it
	// the oldest is dropped.
	PoolSize int
	// CheckPeer, when set, accepts an envd connection only if it returns
	// nil for the connecting process's credentials (SO_PEERCRED). It may
	// block, e.g. until the container's root uid is known.
	CheckPeer func(ctx context.Context, cred *syscall.Ucred) error
	// Logf receives rejected connections (optional).
	Logf func(format string, args ...any)
	// DialWait bounds how long Dial waits for envd to offer a connection
	// (default 30 s), whatever the caller's context allows.
	DialWait time.Duration
}

// Listener is the server's end of one sandbox's relay.
type Listener struct {
	ln   *net.UnixListener
	opts ListenOptions
	idle chan net.Conn

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Listen creates a unix socket at path (replacing a stale socket file of
// an earlier run) and accepts envd connections on it until Close.
func Listen(path string, opts ListenOptions) (*Listener, error) {
	if opts.PoolSize <= 0 {
		opts.PoolSize = 64
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.DialWait <= 0 {
		opts.DialWait = 30 * time.Second
	}
	ln, err := ListenUnix(path)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{ln: ln, opts: opts, idle: make(chan net.Conn, opts.PoolSize), ctx: ctx, cancel: cancel}
	l.wg.Go(l.acceptLoop)
	return l, nil
}

// ListenUnix listens on path, replacing a socket file left by an earlier
// run; anything but a socket at path is an error. The socket is made
// connectable by every user: the peer check, not the file mode, decides.
func ListenUnix(path string) (*net.UnixListener, error) {
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Addr is the socket's path.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

func (l *Listener) acceptLoop() {
	// Connections still in their handshake are bounded: a sandbox that
	// floods the socket gets its extra connections closed at once.
	pending := make(chan struct{}, 2*l.opts.PoolSize)
	for {
		c, err := l.ln.AcceptUnix()
		if err != nil {
			if l.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		select {
		case pending <- struct{}{}:
			l.wg.Go(func() {
				defer func() { <-pending }()
				l.admit(c)
			})
		default:
			c.Close()
		}
	}
}

// admit checks a new envd connection and puts it into the idle pool.
func (l *Listener) admit(c *net.UnixConn) {
	if l.opts.CheckPeer != nil {
		cred, err := peerCred(c)
		if err == nil {
			ctx, cancel := context.WithTimeout(l.ctx, 30*time.Second)
			err = l.opts.CheckPeer(ctx, cred)
			cancel()
		}
		if err != nil {
			l.opts.Logf("relay %s: connection rejected: %v", l.Addr(), err)
			c.Close()
			return
		}
	}
	_ = c.SetDeadline(time.Now().Add(handshakeTO))
	line, err := readLine(c)
	if err != nil || line != hello {
		l.opts.Logf("relay %s: bad hello %q: %v", l.Addr(), line, err)
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	for {
		select {
		case l.idle <- c:
			if l.ctx.Err() != nil {
				l.drain()
			}
			return
		default:
		}
		// Full: drop the oldest, which is the likeliest to be stale.
		select {
		case old := <-l.idle:
			old.Close()
		default:
		}
	}
}

func peerCred(c *net.UnixConn) (*syscall.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, credErr
}

// Dial opens a stream to port inside the sandbox. It waits (within ctx)
// for a pooled envd connection; a stale one (envd restarted) is skipped.
// A port nothing listens on gives a *RefusedError.
func (l *Listener) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("port %d is out of range", port)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, l.opts.DialWait, fmt.Errorf("no connection from envd within %s", l.opts.DialWait))
	defer cancel()
	for {
		var c net.Conn
		select {
		case c = <-l.idle:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%v)", ErrNotConnected, context.Cause(ctx))
		case <-l.ctx.Done():
			return nil, ErrClosed
		}
		deadline := time.Now().Add(handshakeTO)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		_ = c.SetDeadline(deadline)
		if _, err := io.WriteString(c, "CONNECT "+strconv.Itoa(port)+"\n"); err != nil {
			c.Close()
			continue
		}
		line, err := readLine(c)
		if err != nil {
			c.Close()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w (%v)", ErrNotConnected, context.Cause(ctx))
			}
			continue // stale: envd went away since it connected
		}
		_ = c.SetDeadline(time.Time{})
		if line == "OK" {
			return c, nil
		}
		c.Close()
		if reason, ok := strings.CutPrefix(line, "REFUSED"); ok {
			return nil, &RefusedError{Port: port, Reason: strings.TrimSpace(reason)}
		}
		return nil, fmt.Errorf("relay: unexpected answer %q", line)
	}
}

// Close stops accepting, closes the pooled connections and removes the
// socket. Streams already handed out are the callers'.
func (l *Listener) Close() error {
	l.cancel()
	err := l.ln.Close()
	l.wg.Wait()
	l.drain()
	return err
}

func (l *Listener) drain() {
	for {
		select {
		case c := <-l.idle:
			c.Close()
		default:
			return
		}
	}
}
