package client

import (
	"slices"
	"strings"
	"testing"
)

func TestRunRequestProcessConfig(t *testing.T) {
	for _, tc := range []struct {
		name     string
		req      RunRequest
		wantCmd  string
		wantArgs []string
		wantErr  string
	}{
		{name: "shell string", req: RunRequest{Command: "echo hi | wc -c"}, wantCmd: "/bin/bash", wantArgs: []string{"-l", "-c", "echo hi | wc -c"}},
		{name: "program", req: RunRequest{Cmd: "/bin/cat", Args: []string{"-n", "x"}}, wantCmd: "/bin/cat", wantArgs: []string{"-n", "x"}},
		{name: "both", req: RunRequest{Command: "ls", Cmd: "ls"}, wantErr: "both"},
		{name: "neither", req: RunRequest{}, wantErr: "nothing to run"},
		{name: "args with shell string", req: RunRequest{Command: "ls", Args: []string{"-l"}}, wantErr: "arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.req.processConfig()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.GetCmd() != tc.wantCmd || !slices.Equal(cfg.GetArgs(), tc.wantArgs) {
				t.Errorf("got %q %q, want %q %q", cfg.GetCmd(), cfg.GetArgs(), tc.wantCmd, tc.wantArgs)
			}
			if cfg.Cwd != nil {
				t.Errorf("cwd sent as %q although none was asked for", cfg.GetCwd())
			}
		})
	}
}

func TestDescribeShortensLongCommands(t *testing.T) {
	long := RunRequest{Command: strings.Repeat("é", 200)}
	if got := long.describe(); len([]rune(got)) > 90 || !strings.HasSuffix(got, "…\"") {
		t.Errorf("describe of a 200-rune command = %q, want at most ~80 runes ending in an ellipsis", got)
	}
	prog := RunRequest{Cmd: "ls", Args: []string{"-l", "/tmp"}}
	if got := prog.describe(); got != `"ls -l /tmp"` {
		t.Errorf("describe = %s", got)
	}
}
