package relay

import (
	"bufio"
	"encoding/binary"
	"io"
)

// yamux's frame header (hashicorp/yamux const.go): version, type, flags,
// stream ID, length; a data frame's body follows its header.
const (
	frameHeaderSize = 12
	frameTypeData   = 0
)

const (
	// muxReadBuffer is what one read of the channel asks for: a pipe's
	// capacity. yamux reads through a 4 KiB buffer of its own.
	muxReadBuffer = 64 << 10
	// maxCoalescedBody is the largest body sent in the same write as its
	// header; a larger one goes in a write of its own, which then costs
	// little beside it.
	maxCoalescedBody = 256 << 10
)

// muxConn is the connection yamux runs on, cut into system calls that carry
// more: under gVisor every read and write of the exec's pipes enters its
// kernel, and the engine frames and copies each write of the agent's
// output apart (design/performance.md, "Bytes through the channel"). Reads
// ask for muxReadBuffer at a time; a data frame's header is held and sent
// with its body in one write, where yamux writes them one after the other
// (Session.sendLoop, the only writer).
type muxConn struct {
	rwc  io.ReadWriteCloser
	r    *bufio.Reader
	held []byte // a data frame's header awaiting its body, then the frame
}

func newMuxConn(rwc io.ReadWriteCloser) *muxConn {
	return &muxConn{rwc: rwc, r: bufio.NewReaderSize(rwc, muxReadBuffer)}
}

func (c *muxConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *muxConn) Write(p []byte) (int, error) {
	if len(c.held) == 0 {
		if len(p) == frameHeaderSize && p[1] == frameTypeData {
			if n := binary.BigEndian.Uint32(p[8:]); n > 0 && n <= maxCoalescedBody {
				c.held = append(c.held[:0], p...)
				return len(p), nil
			}
		}
		return c.rwc.Write(p)
	}
	c.held = append(c.held, p...)
	_, err := c.rwc.Write(c.held)
	c.held = c.held[:0]
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *muxConn) Close() error { return c.rwc.Close() }
