package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/yamux"
)

// Channel is the server's end of one container's channel.
type Channel struct {
	sess        *yamux.Session
	egress, dns *streamListener
}

// Open starts the server's end on rwc, the standard streams of an agent
// just started (see ServeAgent): it waits for the agent's hello line and
// fails with what arrived instead (an exec error, say). rwc is closed when
// Open fails or the Channel is closed.
func Open(ctx context.Context, rwc io.ReadWriteCloser) (*Channel, error) {
	ctx, cancel := context.WithTimeout(ctx, handshakeTO)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { rwc.Close() })
	line, err := readLine(rwc)
	if !stop() {
		return nil, fmt.Errorf("the channel agent did not say hello within %s: %w", handshakeTO, context.Cause(ctx))
	}
	if err != nil || (line != hello && line != helloV1) {
		rwc.Close()
		return nil, fmt.Errorf("the channel agent did not start: %q: %v", strings.TrimSpace(line), err)
	}
	sess, err := yamux.Client(newMuxConn(rwc), muxConfig())
	if err != nil {
		rwc.Close()
		return nil, err
	}
	c := &Channel{sess: sess, egress: newStreamListener(sess), dns: newStreamListener(sess)}
	go c.sort(line == helloV1)
	return c, nil
}

// sort hands every stream the agent opens to the listener of its kind
// until the channel ends; an agent of version 1 opens egress streams only.
func (c *Channel) sort(v1 bool) {
	for {
		s, err := c.sess.AcceptStream()
		if err != nil {
			return
		}
		if v1 {
			c.egress.hand(s)
			continue
		}
		go func() {
			_ = s.SetReadDeadline(time.Now().Add(handshakeTO))
			kind, err := readLine(s)
			_ = s.SetReadDeadline(time.Time{})
			switch {
			case err != nil:
				s.Close()
			case kind == kindEgress:
				c.egress.hand(s)
			case kind == kindDNS:
				c.dns.hand(s)
			default:
				s.Close()
			}
		}()
	}
}

// Dial opens a stream to port on the loopback of the container's network
// namespace. A port nothing listens on gives a *RefusedError.
func (c *Channel) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("port %d is out of range", port)
	}
	s, err := c.request(ctx, "CONNECT "+strconv.Itoa(port))
	var refused *RefusedError
	if errors.As(err, &refused) {
		refused.Port = port
	}
	return s, err
}

// SetDeadline hands the agent the sandbox's end, which it keeps where envd
// reads it (envd's --deadline-file); the zero time clears it.
func (c *Channel) SetDeadline(ctx context.Context, end time.Time) error {
	var ms int64
	if !end.IsZero() {
		ms = end.UnixMilli()
	}
	s, err := c.request(ctx, "DEADLINE "+strconv.FormatInt(ms, 10))
	if err != nil {
		return err
	}
	return s.Close()
}

// request opens a stream, sends line and reads the agent's answer.
func (c *Channel) request(ctx context.Context, line string) (net.Conn, error) {
	s, err := c.sess.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("channel: %w", err)
	}
	deadline := time.Now().Add(handshakeTO)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = s.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	if _, err := io.WriteString(s, line+"\n"); err != nil {
		s.Close()
		return nil, fmt.Errorf("channel: %w", err)
	}
	answer, err := readLine(s)
	if err != nil {
		s.Close()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("channel: no answer to %q: %w", line, err)
	}
	_ = s.SetDeadline(time.Time{})
	if answer == "OK" {
		return s, nil
	}
	s.Close()
	if reason, ok := strings.CutPrefix(answer, "REFUSED"); ok {
		return nil, &RefusedError{Reason: strings.TrimSpace(reason)}
	}
	return nil, fmt.Errorf("channel: unexpected answer %q", answer)
}

// Egress is the listener of the container's egress proxy connections.
// Closing it closes the channel.
func (c *Channel) Egress() net.Listener { return c.egress }

// DNS is the listener of the container's DNS streams (see ReadDNS).
// Closing it closes the channel.
func (c *Channel) DNS() net.Listener { return c.dns }

// Done is closed once the channel has ended (the agent or its container
// stopped, or Close).
func (c *Channel) Done() <-chan struct{} { return c.sess.CloseChan() }

// Close ends the channel; the agent then exits.
func (c *Channel) Close() error { return c.sess.Close() }

// streamListener is a net.Listener of the agent's streams of one kind.
type streamListener struct {
	sess    *yamux.Session
	streams chan net.Conn
}

func newStreamListener(sess *yamux.Session) *streamListener {
	return &streamListener{sess: sess, streams: make(chan net.Conn)}
}

// hand gives s to the listener's Accept, or closes it once the channel
// ends.
func (l *streamListener) hand(s net.Conn) {
	select {
	case l.streams <- s:
	case <-l.sess.CloseChan():
		s.Close()
	}
}

func (l *streamListener) Accept() (net.Conn, error) {
	select {
	case s := <-l.streams:
		return s, nil
	case <-l.sess.CloseChan():
		return nil, net.ErrClosed
	}
}

func (l *streamListener) Close() error   { return l.sess.Close() }
func (l *streamListener) Addr() net.Addr { return l.sess.Addr() }
