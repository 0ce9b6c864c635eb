package build

import (
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

func TestNonGlobPrefix(t *testing.T) {
	for src, want := range map[string]string{
		"app":           "app",
		"app/":          "app",
		"./app/sub":     "app/sub",
		"src/*.js":      "src",
		"src/**/x.js":   "src",
		"a/b[12]/c":     "a",
		"*.txt":         ".",
		".":             ".",
		"file.{js,ts}":  ".",
		"dir/fi?e.conf": "dir",
	} {
		got, err := nonGlobPrefix(src)
		if err != nil || got != want {
			t.Errorf("nonGlobPrefix(%q) = %q, %v; want %q", src, got, err, want)
		}
	}
	for src, says := range map[string]string{"../x": "escapes the build context", "/etc": "absolute", "a/../../b": "escapes the build context"} {
		if got, err := nonGlobPrefix(src); err == nil || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), src) {
			t.Errorf("nonGlobPrefix(%q) = %q, %v; want an error naming it that says %q", src, got, err, says)
		}
	}
}

func TestEscapeEnvValue(t *testing.T) {
	for in, want := range map[string]string{
		`$HOME/bin`:      `$HOME/bin`,
		`a "quoted" \ x`: `a \"quoted\" \\ x`,
		"`id`":           "\\`id\\`",
		`$(id) ${X}`:     `\$(id) ${X}`,
	} {
		if got := escapeEnvValue(in); got != want {
			t.Errorf("escapeEnvValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLineLogSplitsStreamsAndKeepsTail(t *testing.T) {
	var lines []string
	l := newLineLog(func(line string) { lines = append(lines, line) })
	l.write(client.Stdout, []byte("one\ntw"))
	l.write(client.Stderr, []byte("err\r\n"))
	l.write(client.Stdout, []byte("o\nthree"))
	l.write(client.Stdout, []byte(strings.Repeat("x", maxLogLine)))
	l.write(client.Stdout, []byte("\nfour\nfive"))
	l.flush()
	long := "three" + strings.Repeat("x", maxLogLine-5)
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
