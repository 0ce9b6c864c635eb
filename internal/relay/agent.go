package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
)

// AgentOptions configure ServeAgent, the container's end of the channel.
type AgentOptions struct {
	// Dial opens the local connection for a port the server names.
	Dial func(ctx context.Context, port int) (net.Conn, error)
	// EgressSocket, when set, is a unix socket path the agent listens on;
	// every connection to it becomes a stream to the server's egress proxy
	// (envd offers it to the sandbox on a TCP port). A socket file left by
	// an earlier agent is replaced.
	EgressSocket string
	// DeadlineFile is where the sandbox's end is kept for envd (its
	// --deadline-file); required for DEADLINE requests.
	DeadlineFile string
	// DNSListen, when set, is a loopback address (127.0.0.1:53 in a
	// container) where the agent answers DNS over UDP and TCP by sending
	// every query to the server on a stream of its own. An address in use
	// (root of the sandbox bound it while no agent ran) is warned about,
	// not fatal: the sandbox keeps its channel.
	DNSListen string
	// Warn, when set, is told what the agent could not do without ending
	// (listen for DNS).
	Warn func(msg string)
	// MaxStreams bounds the streams served at once in each direction
	// (default 1024); a stream beyond it is refused.
	MaxStreams int
}

// ServeAgent serves the channel on rwc (the agent's standard input and
// output) until the server ends it or ctx ends.
func ServeAgent(ctx context.Context, rwc io.ReadWriteCloser, opts AgentOptions) error {
	if opts.Dial == nil {
		return errors.New("relay: a dial function is required")
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = 1024
	}
	// Listening first: queries sent once the server has the hello find
	// the agent listening.
	var dnsTCP net.Listener
	var dnsUDP net.PacketConn
	if opts.DNSListen != "" {
		var err error
		if dnsTCP, dnsUDP, err = listenDNS(opts.DNSListen); err != nil {
			if opts.Warn != nil {
				opts.Warn("no DNS resolver in the sandbox: " + err.Error())
			}
		} else {
			defer dnsTCP.Close()
			defer dnsUDP.Close()
		}
	}
	if _, err := io.WriteString(rwc, hello+"\n"); err != nil {
		return err
	}
	sess, err := yamux.Server(newMuxConn(rwc), muxConfig())
	if err != nil {
		return err
	}
	defer sess.Close()
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	a := &agent{opts: opts, sess: sess}
	var wg sync.WaitGroup
	if opts.EgressSocket != "" {
		ln, err := listenUnix(opts.EgressSocket)
		if err != nil {
			return fmt.Errorf("egress socket: %w", err)
		}
		defer ln.Close()
		go func() { <-sess.CloseChan(); ln.Close() }()
		wg.Go(func() { a.forward(ln, kindEgress) })
	}
	if dnsTCP != nil {
		go func() { <-sess.CloseChan(); dnsTCP.Close(); dnsUDP.Close() }()
		wg.Go(func() { a.forward(dnsTCP, kindDNS) })
		wg.Go(func() { a.serveDNSPackets(dnsUDP) })
	}
	slots := make(chan struct{}, opts.MaxStreams)
	for {
		s, err := sess.AcceptStream()
		if err != nil {
			break
		}
		select {
		case slots <- struct{}{}:
			wg.Go(func() {
				defer func() { <-slots }()
				a.serve(ctx, s)
			})
		default:
			_, _ = io.WriteString(s, "REFUSED too many streams\n")
			s.Close()
		}
	}
	sess.Close()
	wg.Wait()
	return nil
}

type agent struct {
	opts AgentOptions
	sess *yamux.Session
}

// serve answers one stream the server opened.
func (a *agent) serve(ctx context.Context, s net.Conn) {
	_ = s.SetDeadline(time.Now().Add(handshakeTO))
	line, err := readLine(s)
	if err != nil {
		s.Close()
		return
	}
	_ = s.SetDeadline(time.Time{})
	verb, arg, _ := strings.Cut(line, " ")
	n, nerr := strconv.ParseInt(arg, 10, 64)
	switch {
	case verb == "CONNECT" && nerr == nil && n >= 1 && n <= 65535:
		dialCtx, cancel := context.WithTimeout(ctx, handshakeTO)
		target, err := a.opts.Dial(dialCtx, int(n))
		cancel()
		if err != nil {
			refuse(s, err.Error())
			return
		}
		if _, err := io.WriteString(s, "OK\n"); err != nil {
			s.Close()
			target.Close()
			return
		}
		Pipe(s, target)
	case verb == "DEADLINE" && nerr == nil && n >= 0 && a.opts.DeadlineFile != "":
		if err := writeDeadline(a.opts.DeadlineFile, n); err != nil {
			refuse(s, err.Error())
			return
		}
		_, _ = io.WriteString(s, "OK\n")
		s.Close()
	default:
		refuse(s, "bad request")
	}
}

func refuse(s net.Conn, reason string) {
	reason = strings.NewReplacer("\n", " ", "\r", " ").Replace(reason)
	if len(reason) > maxLine-16 {
		reason = reason[:maxLine-16]
	}
	_, _ = io.WriteString(s, "REFUSED "+reason+"\n")
	s.Close()
}

// forward turns every connection accepted on ln into a stream of kind to
// the server, at most MaxStreams at once.
func (a *agent) forward(ln net.Listener, kind string) {
	ln = LimitListener(ln, a.opts.MaxStreams)
	for {
		c, err := ln.Accept()
		if err != nil {
			if a.sess.IsClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		go func() {
			s, err := a.open(kind)
			if err != nil {
				c.Close()
				return
			}
			Pipe(c, s)
		}()
	}
}

// open opens a stream to the server and names its kind.
func (a *agent) open(kind string) (net.Conn, error) {
	s, err := a.sess.OpenStream()
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(s, kind+"\n"); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// listenDNS listens on addr for DNS over TCP and over UDP.
func listenDNS(addr string) (net.Listener, net.PacketConn, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	// The same port for both when addr's is 0 (tests).
	pc, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	return ln, pc, nil
}

// writeDeadline keeps ms (0: none) in path for envd, replacing the file in
// one rename so that envd never reads half of it.
func writeDeadline(path string, ms int64) error {
	if ms == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(envd.FormatDeadline(time.UnixMilli(ms)))
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// listenUnix listens on path, replacing whatever is there: a socket an
// earlier agent left, or anything root of the sandbox put in its place
// (a link is removed, never followed).
func listenUnix(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return net.Listen("unix", path)
}

// StdioConn is the agent's standard input and output as one stream.
type StdioConn struct {
	In  io.ReadCloser
	Out io.WriteCloser
}

func (s StdioConn) Read(p []byte) (int, error)  { return s.In.Read(p) }
func (s StdioConn) Write(p []byte) (int, error) { return s.Out.Write(p) }

// Close closes both.
func (s StdioConn) Close() error { return errors.Join(s.In.Close(), s.Out.Close()) }
