package build

import (
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

func TestLineLogSplitsStreamsAndKeepsTail(t *testing.T) {
	var lines []string
	l := newLineLog(func(line string) { lines = append(lines, line) })
	l.Write(client.Stdout, []byte("one\ntw"))
	l.Write(client.Stderr, []byte("err\r\n"))
	l.Write(client.Stdout, []byte("o\nthree"))
	l.Write(client.Stdout, []byte(strings.Repeat("x", client.MaxLineBytes)))
	l.Write(client.Stdout, []byte("\nfour\nfive"))
	l.Flush()
	long := "three" + strings.Repeat("x", client.MaxLineBytes-5)
	want := []string{"one", "err", "two", long, "xxxxx", "four", "five"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d", len(lines), len(want))
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d = %.40q…, want %.40q…", i, lines[i], want[i])
		}
	}
	if tail := l.tail(); !strings.HasSuffix(tail, "\nfour\nfive") || strings.Contains(tail, "err") || !strings.Contains(tail, "two") {
		t.Errorf("tail %.60q… should hold exactly the last %d lines", tail, failureLines)
	}
}
