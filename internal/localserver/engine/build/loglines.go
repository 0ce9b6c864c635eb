package build

import (
	"bytes"
	"strings"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

// maxLogLine bounds one log line; longer runs without a newline are split.
const maxLogLine = 16 << 10

// lineLog turns a process's output chunks into log lines, one stream at a
// time, and remembers the last few lines for error messages.
type lineLog struct {
	emit    func(line string)
	pending map[client.Stream][]byte
	last    []string
}

func newLineLog(emit func(line string)) *lineLog {
	return &lineLog{emit: emit, pending: map[client.Stream][]byte{}}
}

// write is a client.RunRequest.OnOutput.
func (l *lineLog) write(stream client.Stream, chunk []byte) {
	buf := append(l.pending[stream], chunk...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		l.line(buf[:i])
		buf = buf[i+1:]
	}
	for len(buf) >= maxLogLine {
		l.line(buf[:maxLogLine])
		buf = buf[maxLogLine:]
	}
	l.pending[stream] = append([]byte(nil), buf...)
}

// flush logs what is left without a final newline.
func (l *lineLog) flush() {
	for _, s := range []client.Stream{client.Stdout, client.Stderr} {
		if len(l.pending[s]) > 0 {
			l.line(l.pending[s])
			l.pending[s] = nil
		}
	}
}

func (l *lineLog) line(b []byte) {
	// Both streams log at info: tools write progress to stderr.
	line := strings.TrimRight(string(b), "\r")
	l.emit(line)
	l.last = append(l.last, line)
	if len(l.last) > failureLines {
		l.last = l.last[1:]
	}
}

// tail is the last lines as a suffix for an error message.
func (l *lineLog) tail() string {
	if len(l.last) == 0 {
		return ""
	}
	return ":\n" + strings.Join(l.last, "\n")
}
