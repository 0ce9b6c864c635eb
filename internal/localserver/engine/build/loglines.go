package build

import (
	"strings"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

// lineLog logs a process's output line by line (client.Lines splits it,
// each stream apart) and remembers the last few lines for error messages.
type lineLog struct {
	*client.Lines
	emit func(line string)
	last []string
}

func newLineLog(emit func(line string)) *lineLog {
	l := &lineLog{emit: emit}
	// Both streams log at info: tools write progress to stderr.
	l.Lines = client.NewLines(func(_ client.Stream, line string) { l.line(line) })
	return l
}

func (l *lineLog) line(line string) {
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
