//go:build linux

package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// logLines decodes every JSON line envd wrote to b so far.
func logLines(t *testing.T, b *testutil.SyncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range bytes.Lines([]byte(b.String())) {
		if n := bytes.Count(line, []byte(`"logger":`)); n > 1 {
			t.Errorf("log line %q names its logger %d times", line, n)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestProcessStartAndEndLogged: envd logs every process's start and end
// as E2B's envd does, by the time the stream has seen the end.
func TestProcessStartAndEndLogged(t *testing.T) {
	var buf testutil.SyncBuffer
	e := startEnvd(t, Config{Logger: NewLogger(&buf)})
	r := run(t, e, shell("printf out; printf error >&2; exit 3"), nil)
	var start, end map[string]any
	for _, l := range logLines(t, &buf) {
		switch l["event_type"] {
		case "process_start":
			start = l
		case "process_end":
			end = l
		}
	}
	if start == nil || end == nil {
		t.Fatalf("log lines %v, want a process_start and a process_end", logLines(t, &buf))
	}
	if start["level"] != "info" || start["logger"] != "process" || start["timestamp"] == nil || start["message"] != fmt.Sprintf("Process with pid %d started", r.pid) ||
		start["pid"] != float64(r.pid) || start["command"] != "/bin/sh -c printf out; printf error >&2; exit 3" {
		t.Errorf("start line = %v", start)
	}
	if ms, ok := start["request_timeout_ms"].(float64); !ok || ms <= 0 || ms > 120_000 {
		t.Errorf("start line's request_timeout_ms = %v, want the 2 min deadline of the call", start["request_timeout_ms"])
	}
	result, _ := end["process_result"].(map[string]any)
	if end["level"] != "info" || end["message"] != fmt.Sprintf("Process with pid %d ended", r.pid) ||
		end["stdout_bytes"] != float64(3) || end["stderr_bytes"] != float64(5) || end["pty_bytes"] != float64(0) ||
		result["exit_code"] != float64(3) || result["exited"] != true || result["status"] != "exit status 3" {
		t.Errorf("end line = %v", end)
	}
}

// A PTY's output is counted as such.
func TestProcessEndLogCountsPTY(t *testing.T) {
	var buf testutil.SyncBuffer
	e := startEnvd(t, Config{Logger: NewLogger(&buf)})
	req := shell("printf abcd")
	req.Pty = &pb.PTY{Size: &pb.PTY_Size{Cols: 80, Rows: 24}}
	r := run(t, e, req, nil)
	for _, l := range logLines(t, &buf) {
		if l["event_type"] == "process_end" {
			if l["pty_bytes"] != float64(len(r.pty)) || l["stdout_bytes"] != float64(0) || len(r.pty) == 0 {
				t.Errorf("end line = %v, want pty_bytes %d", l, len(r.pty))
			}
			return
		}
	}
	t.Fatalf("no process_end line in %v", logLines(t, &buf))
}
