package relay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"time"
)

// dnsTimeout bounds one query's round trip through the channel: the
// server's look-up is bounded below it, and a resolver in the sandbox
// retries on its own.
const dnsTimeout = 15 * time.Second

// ReadDNS reads one DNS message framed as DNS over TCP (RFC 1035 4.2.2: a
// two-byte big-endian length, then the message).
func ReadDNS(r io.Reader) ([]byte, error) {
	var n uint16
	if err := binary.Read(r, binary.BigEndian, &n); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("relay: empty DNS message")
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

// WriteDNS writes msg framed as DNS over TCP, in one write.
func WriteDNS(w io.Writer, msg []byte) error {
	if len(msg) == 0 || len(msg) > 0xffff {
		return errors.New("relay: a DNS message must be 1 to 65535 bytes")
	}
	framed := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(msg)), uint16(len(msg))) //nolint:gosec // checked above
	_, err := w.Write(append(framed, msg...))
	return err
}

// serveDNSPackets sends every query that arrives on pc to the server on a
// stream of its own and writes the answer back to its sender, at most
// MaxStreams at once; a query beyond that is dropped (the sender retries).
func (a *agent) serveDNSPackets(pc net.PacketConn) {
	slots := make(chan struct{}, a.opts.MaxStreams)
	buf := make([]byte, 0xffff)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if a.sess.IsClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if n == 0 {
			continue
		}
		query := bytes.Clone(buf[:n])
		select {
		case slots <- struct{}{}:
		default:
			continue
		}
		go func() {
			defer func() { <-slots }()
			if answer, err := a.askDNS(query); err == nil {
				_, _ = pc.WriteTo(answer, from)
			}
		}()
	}
}

// askDNS sends one query to the server and returns its answer.
func (a *agent) askDNS(query []byte) ([]byte, error) {
	s, err := a.open(kindDNS)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(dnsTimeout))
	if err := WriteDNS(s, query); err != nil {
		return nil, err
	}
	return ReadDNS(s)
}
