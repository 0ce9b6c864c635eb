package client

import (
	"slices"
	"strings"
	"testing"
)

// TestLines splits chunks into lines per stream: a half line waits for its end, the
// other stream's lines pass it, long runs are split and Flush emits the rest.
func TestLines(t *testing.T) {
	var got []string
	l := NewLines(func(s Stream, line string) { got = append(got, s.String()+":"+line) })
	l.Write(Stdout, []byte("a\r\nb"))
	l.Write(Stderr, []byte("e1\n"))
	l.Write(Stdout, []byte("c\nd"))
	l.Write(Stderr, []byte(strings.Repeat("x", MaxLineBytes+1)))
	l.Flush()
	want := []string{"stdout:a", "stderr:e1", "stdout:bc", "stderr:" + strings.Repeat("x", MaxLineBytes), "stdout:d", "stderr:x"}
	if !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
}
