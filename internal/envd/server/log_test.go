package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
)

// lockedBuffer is a log destination the test reads while envd writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines decodes every JSON line written so far.
func (b *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range bytes.Lines(b.buf.Bytes()) {
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
	var buf lockedBuffer
	e := startEnvd(t, Config{Logger: NewLogger(&buf)})
	r := run(t, e, shell("printf out; printf error >&2; exit 3"), nil)
	var start, end map[string]any
	for _, l := range buf.lines(t) {
		switch l["event_type"] {
		case "process_start":
			start = l
		case "process_end":
			end = l
		}
	}
	if start == nil || end == nil {
		t.Fatalf("log lines %v, want a process_start and a process_end", buf.lines(t))
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
	var buf lockedBuffer
	e := startEnvd(t, Config{Logger: NewLogger(&buf)})
	req := shell("printf abcd")
	req.Pty = &pb.PTY{Size: &pb.PTY_Size{Cols: 80, Rows: 24}}
	r := run(t, e, req, nil)
	for _, l := range buf.lines(t) {
		if l["event_type"] == "process_end" {
			if l["pty_bytes"] != float64(len(r.pty)) || l["stdout_bytes"] != float64(0) || len(r.pty) == 0 {
				t.Errorf("end line = %v, want pty_bytes %d", l, len(r.pty))
			}
			return
		}
	}
	t.Fatalf("no process_end line in %v", buf.lines(t))
}
