//go:build linux

package server

import (
	"io"
	"log/slog"
	"strings"
)

// NewLogger is envd's one logger: JSON lines shaped as E2B envd's zerolog
// writes them ("level" in lower case, "timestamp", "message"; Run and the
// Server add "logger" as envd's main.go does: "envd", or "process" for
// processes), which the local server's sandbox logs parse as E2B's log
// pipeline does.
func NewLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				a.Key = "timestamp"
			case slog.LevelKey:
				a.Value = slog.StringValue(strings.ToLower(a.Value.String()))
			case slog.MessageKey:
				a.Key = "message"
			}
			return a
		},
	}))
}
