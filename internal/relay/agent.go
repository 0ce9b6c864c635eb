package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AgentOptions configure Serve, envd's end of the relay.
type AgentOptions struct {
	// Socket is the server's relay socket (a path).
	Socket string
	// Dial opens the local connection for a port the server names.
	Dial func(ctx context.Context, port int) (net.Conn, error)
	// Idle is how many connections wait for the server at once (default 4).
	Idle int
	// MaxStreams bounds the streams piped at once (default 1024); when
	// reached, no further connection is offered until one ends.
	MaxStreams int
	// Logf receives connection problems (optional).
	Logf func(format string, args ...any)
}

const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// Serve keeps opts.Idle connections dialled to the server's socket and
// serves the streams the server asks for, until ctx ends. A server that
// goes away (restart) is redialled with a growing pause.
func Serve(ctx context.Context, opts AgentOptions) error {
	if opts.Socket == "" || opts.Dial == nil {
		return errors.New("relay: a socket and a dial function are required")
	}
	if opts.Idle <= 0 {
		opts.Idle = 4
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = 1024
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	a := &agent{opts: opts, streams: make(chan struct{}, opts.MaxStreams)}
	var wg sync.WaitGroup
	for range opts.Idle {
		wg.Go(func() { a.worker(ctx) })
	}
	wg.Wait()
	return nil
}

type agent struct {
	opts    AgentOptions
	streams chan struct{} // a token per piped stream
}

func (a *agent) worker(ctx context.Context) {
	backoff := minBackoff
	pause := func() bool {
		t := time.NewTimer(backoff)
		defer t.Stop()
		backoff = min(backoff*2, maxBackoff)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	var d net.Dialer
	for ctx.Err() == nil {
		// Back-pressure: offer a connection only while a stream slot is free.
		select {
		case a.streams <- struct{}{}:
		case <-ctx.Done():
			return
		}
		release := func() { <-a.streams }
		c, err := d.DialContext(ctx, "unix", a.opts.Socket)
		if err != nil {
			release()
			if !pause() {
				return
			}
			continue
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		port, err := a.handshake(c)
		if err != nil {
			stop()
			c.Close()
			release()
			if !pause() {
				return
			}
			continue
		}
		backoff = minBackoff
		target, err := a.opts.Dial(ctx, port)
		if err != nil {
			_, _ = io.WriteString(c, "REFUSED "+oneLine(err.Error())+"\n")
			stop()
			c.Close()
			release()
			continue
		}
		if _, err := io.WriteString(c, "OK\n"); err != nil {
			stop()
			c.Close()
			target.Close()
			release()
			continue
		}
		stop()
		go func() {
			defer release()
			Pipe(c, target)
		}()
	}
}

// handshake says hello and waits for the server to name a port.
func (a *agent) handshake(c net.Conn) (int, error) {
	if _, err := io.WriteString(c, hello+"\n"); err != nil {
		return 0, err
	}
	line, err := readLine(c)
	if err != nil {
		return 0, err
	}
	raw, ok := strings.CutPrefix(line, "CONNECT ")
	port, perr := strconv.Atoi(raw)
	if !ok || perr != nil || port < 1 || port > 65535 {
		_, _ = io.WriteString(c, "REFUSED bad request\n")
		return 0, fmt.Errorf("relay: bad request %q", line)
	}
	return port, nil
}

func oneLine(s string) string {
	s = strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
	if len(s) > maxLine-16 {
		s = s[:maxLine-16]
	}
	return s
}

// closeWriter is what TCP and unix connections have to half-close.
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

func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSocket == 0:
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	return os.Remove(path)
}

func chmod(path string, mode fs.FileMode) error { return os.Chmod(path, mode) }

// LimitListener accepts at most n connections open at once; Accept waits
// for one to close beyond that. Close ends a waiting Accept.
func LimitListener(ln net.Listener, n int) net.Listener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
