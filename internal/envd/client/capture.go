package client

// capture keeps the first limit bytes written to it and remembers whether
// more arrived, so that a command's output costs at most limit bytes of
// memory and a cut is always visible.
type capture struct {
	limit     int
	buf       []byte
	truncated bool
}

func newCapture(limit int64) *capture {
	return &capture{limit: int(limit)}
}

func (c *capture) write(p []byte) {
	room := c.limit - len(c.buf)
	if len(p) > room {
		p = p[:room]
		c.truncated = true
	}
	if len(p) == 0 {
		return
	}
	if need := len(c.buf) + len(p); need > cap(c.buf) {
		// Grow by doubling like append, but never past the limit, so the
		// backing array never exceeds what may be kept.
		grown := make([]byte, len(c.buf), min(max(2*cap(c.buf), need), c.limit))
		copy(grown, c.buf)
		c.buf = grown
	}
	c.buf = append(c.buf, p...)
}
