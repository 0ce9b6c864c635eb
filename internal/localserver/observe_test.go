//go:build linux

package localserver

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

func TestSandboxMetrics(t *testing.T) {
	eng := newFakeEngine(t)
	ts := startServer(t, eng)
	ts.build("app")
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app"})
	path := "/sandboxes/" + sb.SandboxID + "/metrics"

	var metrics []e2b.SandboxMetric
	ts.call("GET", path, nil, http.StatusOK, &metrics)
	if len(metrics) != 1 {
		t.Fatalf("metrics = %+v, want one sample", metrics)
	}
	m := metrics[0]
	if m.CPUCount != 2 || m.CPUUsedPct != 12.5 || m.MemUsed != 64<<20 || m.MemTotal != 1<<30 || m.DiskUsed != 10<<20 ||
		m.TimestampUnix != m.Timestamp.Unix() || time.Since(m.Timestamp) > time.Minute {
		t.Errorf("metric = %+v, want the engine's sample, stamped now", m)
	}
	past := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
	ts.call("GET", path+"?start=0&end="+past, nil, http.StatusOK, &metrics)
	if len(metrics) != 0 {
		t.Errorf("metrics of a window in the past = %+v, want none: no history is kept", metrics)
	}
	ts.expectError("GET", path+"?start=10&end=5", nil, http.StatusBadRequest, "start 10 is after end 5")
	ts.expectError("GET", "/sandboxes/inope/metrics", nil, http.StatusNotFound, "not found")

	var all struct {
		Sandboxes map[string]e2b.SandboxMetric `json:"sandboxes"`
	}
	ts.call("GET", "/sandboxes/metrics?sandbox_ids="+sb.SandboxID+",inope", nil, http.StatusOK, &all)
	if len(all.Sandboxes) != 1 || all.Sandboxes[sb.SandboxID].CPUCount != 2 {
		t.Errorf("GET /sandboxes/metrics = %+v, want the one live sandbox", all)
	}
}

func TestSandboxLogs(t *testing.T) {
	eng := newFakeEngine(t)
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	eng.logs = []engine.LogLine{
		{Time: base, Text: "envd 0.6.13 listening on 0.0.0.0:49983"},
		{Time: base.Add(time.Second), Text: `{"level":"warn","logger":"processSvc","message":"process 7 killed","pid":7,"ok":false}`},
		{Time: base.Add(2 * time.Second), Text: `{"level":"error","msg":"disk full"}`},
	}
	ts := startServer(t, eng)
	ts.build("app")
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app"})

	var v1 e2b.SandboxLogs
	ts.call("GET", "/sandboxes/"+sb.SandboxID+"/logs", nil, http.StatusOK, &v1)
	if len(v1.Logs) != 3 || len(v1.LogEntries) != 3 {
		t.Fatalf("v1 logs = %+v, want three", v1)
	}
	// The CLI's `sandbox logs` parses each line as JSON and reads its level.
	for _, l := range v1.Logs {
		var line map[string]any
		if err := json.Unmarshal([]byte(l.Line), &line); err != nil || line["level"] == nil {
			t.Errorf("v1 line %q is not a JSON object with a level: %v", l.Line, err)
		}
	}
	plain, structured := v1.LogEntries[0], v1.LogEntries[1]
	if plain.Level != "info" || plain.Message != "envd 0.6.13 listening on 0.0.0.0:49983" || plain.Fields["logger"] != "envd" || !plain.Timestamp.Equal(base) {
		t.Errorf("plain entry = %+v", plain)
	}
	if structured.Level != "warn" || structured.Message != "process 7 killed" || structured.Fields["logger"] != "processSvc" ||
		structured.Fields["pid"] != "7" || structured.Fields["ok"] != "false" || structured.Fields["level"] != "" {
		t.Errorf("structured entry = %+v", structured)
	}
	if v1.LogEntries[2].Message != "disk full" || v1.LogEntries[2].Level != "error" {
		t.Errorf("msg entry = %+v", v1.LogEntries[2])
	}
	ts.call("GET", "/sandboxes/"+sb.SandboxID+"/logs?start="+strconv.FormatInt(base.Add(time.Second).UnixMilli(), 10)+"&limit=1", nil, http.StatusOK, &v1)
	if len(v1.Logs) != 1 || v1.LogEntries[0].Level != "warn" {
		t.Errorf("v1 logs from the second on, limit 1 = %+v", v1.LogEntries)
	}

	messages := func(query string) []string {
		t.Helper()
		var v2 e2b.SandboxLogsV2Response
		ts.call("GET", "/v2/sandboxes/"+sb.SandboxID+"/logs"+query, nil, http.StatusOK, &v2)
		var out []string
		for _, e := range v2.Logs {
			out = append(out, e.Message)
		}
		return out
	}
	if got := messages(""); len(got) != 3 || got[0] != "disk full" {
		t.Errorf("v2 logs = %q, want all three, newest first", got)
	}
	if got := messages("?direction=forward&level=warn"); len(got) != 2 || got[0] != "process 7 killed" {
		t.Errorf("v2 logs forward from warn = %q", got)
	}
	if got := messages("?cursor=" + strconv.FormatInt(base.Add(time.Second).UnixMilli(), 10)); len(got) != 2 || got[0] != "process 7 killed" {
		t.Errorf("v2 logs backward from the second = %q", got)
	}
	if got := messages("?search=listening&limit=5"); len(got) != 1 {
		t.Errorf("v2 logs searching 'listening' = %q", got)
	}
	expectError(t, ts.direct("GET", "/v2/sandboxes/"+sb.SandboxID+"/logs?limit=1001", nil), http.StatusBadRequest, "limit 1001")
	ts.expectError("GET", "/v2/sandboxes/inope/logs", nil, http.StatusNotFound, "not found")
	ts.expectError("GET", "/sandboxes/inope/logs", nil, http.StatusNotFound, "not found")
}

// A sandbox's log is taken into the store as it is asked for: lines written
// since are added once, the log keeps its beginning and its end within the
// bound with a marker (a JSON line at level warn for the CLI), and it goes
// with the sandbox.
func TestSandboxLogsBoundedAndStoredOnce(t *testing.T) {
	eng := newFakeEngine(t)
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	line := func(i int) engine.LogLine {
		return engine.LogLine{Time: base.Add(time.Duration(i) * time.Millisecond), Text: "line " + strconv.Itoa(i)}
	}
	eng.logs = []engine.LogLine{line(0), line(1)}
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.LogBound = store.LogBound{MaxEntries: 4} }})
	ts.build("app")
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app"})
	forward := func() []string {
		t.Helper()
		var v1 e2b.SandboxLogs
		ts.call("GET", "/sandboxes/"+sb.SandboxID+"/logs", nil, http.StatusOK, &v1)
		var out []string
		for i, e := range v1.LogEntries {
			var raw map[string]string
			if err := json.Unmarshal([]byte(v1.Logs[i].Line), &raw); err != nil || raw["level"] != e.Level {
				t.Errorf("v1 line %q: %v, want JSON at level %s", v1.Logs[i].Line, err, e.Level)
			}
			out = append(out, e.Level+" "+e.Message)
		}
		return out
	}
	if got := forward(); !slices.Equal(got, []string{"info line 0", "info line 1"}) {
		t.Errorf("first read = %q", got)
	}
	eng.mu.Lock()
	for i := 2; i < 10; i++ {
		eng.logs = append(eng.logs, line(i))
	}
	eng.mu.Unlock()
	marker := "warn [6 log entries (36 bytes) dropped here: the log keeps its beginning and its end]"
	want := []string{"info line 0", "info line 1", marker, "info line 8", "info line 9"}
	if got := forward(); !slices.Equal(got, want) {
		t.Errorf("after 8 more lines = %q, want %q", got, want)
	}
	if got := forward(); !slices.Equal(got, want) {
		t.Errorf("read again = %q, want %q", got, want)
	}
	var v2 e2b.SandboxLogsV2Response
	ts.call("GET", "/v2/sandboxes/"+sb.SandboxID+"/logs?level=warn", nil, http.StatusOK, &v2)
	if len(v2.Logs) != 1 || v2.Logs[0].Level+" "+v2.Logs[0].Message != marker || v2.Logs[0].Fields["logger"] != "envd" {
		t.Errorf("v2 warn = %+v, want the marker", v2.Logs)
	}

	ts.call("DELETE", "/sandboxes/"+sb.SandboxID, nil, http.StatusNoContent, nil)
	if page, err := ts.Server.Store().Sandboxes.SandboxLogPage(sb.SandboxID, store.LogQuery{Cursor: -1, Limit: 10}); err != nil || len(page) != 0 {
		t.Errorf("the killed sandbox's log = %+v %v, want none", page, err)
	}
}
