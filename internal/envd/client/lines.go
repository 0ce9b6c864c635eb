package client

import (
	"bytes"
	"strings"
)

// MaxLineBytes bounds one line of Lines; a longer run without a newline is split.
const MaxLineBytes = 16 << 10

// Lines turns a process's output chunks (RunRequest.OnOutput) into lines, each stream
// apart, so that a caller can show output as it arrives without a stream's half line
// mixing with the other's.
type Lines struct {
	emit    func(stream Stream, line string)
	pending map[Stream][]byte
}

// NewLines calls emit with every line written to it, without its newline (nor a
// carriage return before it).
func NewLines(emit func(stream Stream, line string)) *Lines {
	return &Lines{emit: emit, pending: map[Stream][]byte{}}
}

// Write is a RunRequest.OnOutput.
func (l *Lines) Write(stream Stream, chunk []byte) {
	buf := append(l.pending[stream], chunk...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		l.line(stream, buf[:i])
		buf = buf[i+1:]
	}
	for len(buf) >= MaxLineBytes {
		l.line(stream, buf[:MaxLineBytes])
		buf = buf[MaxLineBytes:]
	}
	l.pending[stream] = append([]byte(nil), buf...)
}

// Flush emits what is left of each stream without a final newline.
func (l *Lines) Flush() {
	for _, s := range []Stream{Stdout, Stderr} {
		if len(l.pending[s]) > 0 {
			l.line(s, l.pending[s])
			l.pending[s] = nil
		}
	}
}

func (l *Lines) line(stream Stream, b []byte) {
	l.emit(stream, strings.TrimRight(string(b), "\r"))
}
