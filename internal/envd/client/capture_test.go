//go:build linux

package client

import (
	"bytes"
	"testing"
)

func TestCaptureKeepsPrefixAndFlagsExcess(t *testing.T) {
	for _, tc := range []struct {
		name      string
		limit     int64
		writes    []string
		want      string
		truncated bool
	}{
		{name: "under the cap", limit: 10, writes: []string{"abc", "def"}, want: "abcdef"},
		{name: "exactly the cap", limit: 6, writes: []string{"abc", "def"}, want: "abcdef"},
		{name: "one write crosses", limit: 4, writes: []string{"abc", "def"}, want: "abcd", truncated: true},
		{name: "writes after full", limit: 3, writes: []string{"abc", "d", "", "ef"}, want: "abc", truncated: true},
		{name: "empty writes only", limit: 3, writes: []string{"", ""}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCapture(tc.limit)
			for _, w := range tc.writes {
				c.write([]byte(w))
			}
			if string(c.buf) != tc.want || c.truncated != tc.truncated {
				t.Errorf("got %q truncated=%v, want %q truncated=%v", c.buf, c.truncated, tc.want, tc.truncated)
			}
		})
	}
}

// The backing array never grows past the cap, so memory is bounded by it.
func TestCaptureNeverAllocatesPastCap(t *testing.T) {
	const limit = 1<<20 + 7
	c := newCapture(limit)
	chunk := bytes.Repeat([]byte{'x'}, 32<<10)
	for range 100 {
		c.write(chunk)
	}
	if len(c.buf) != limit || !c.truncated {
		t.Fatalf("len %d truncated %v, want %d and true", len(c.buf), c.truncated, limit)
	}
	if cap(c.buf) > limit {
		t.Errorf("capacity %d exceeds the cap %d", cap(c.buf), limit)
	}
}
