//go:build linux

package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
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

// lateTimerContext has passed its deadline but, like a context whose timer
// goroutine has not run yet on a busy machine, does not say so through Err.
type lateTimerContext struct {
	context.Context
	deadline time.Time
}

func (c lateTimerContext) Deadline() (time.Time, bool) { return c.deadline, true }

// The end event of a process envd killed at the stream's deadline can arrive
// before the client's own deadline timer fires: it is the timeout all the
// same, not a process that died of a signal.
func TestFinishKillAtRemoteDeadlineIsTimeout(t *testing.T) {
	ctx := t.Context()
	runCtx := lateTimerContext{Context: ctx, deadline: time.Now().Add(-500 * time.Microsecond)}
	r := &run{
		req:     &RunRequest{Cmd: "sleep", Args: []string{"600"}, Timeout: 2 * time.Second},
		op:      "run sleep",
		result:  &RunResult{PID: 7},
		stdout:  newCapture(0),
		stderr:  newCapture(0),
		started: true,
		end:     &process.ProcessEvent_EndEvent{ExitCode: -1, Exited: false, Status: "signal: killed"},
	}
	res, err := r.finish(ctx, runCtx, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "2s timeout") {
		t.Fatalf("error = %v, want the timeout, wrapping DeadlineExceeded", err)
	}
	if res == nil || res.PID != 7 || res.Exited {
		t.Errorf("result = %+v, want the killed process's", res)
	}
}
