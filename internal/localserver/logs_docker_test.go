package localserver

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// A RUN step printing 300,000 lines leaves the build's log within the
// server's bound (its head and tail, with a marker for the rest), and a
// one-entry page of it costs what a page of a short log does. The figures
// (database growth, time per page, the server's RSS) are printed, not
// asserted; the bound and the marker are.
func TestDockerLongBuildLogIsBounded(t *testing.T) {
	const maxEntries, lines = 4000, 300_000
	_, baseImage := dockerEngine(t)
	binary := buildEnvdBinary(t)
	dataDir := t.TempDir()
	cmd, info, _ := startCommandLog(t, binary, dataDir, "--max-log-entries", strconv.Itoa(maxEntries))
	ts := &testServer{t: t, URL: info.APIURL, client: http.DefaultClient, apiKey: info.APIKey}
	pid := cmd.Process.Pid
	dbPath := filepath.Join(dataDir, "state.db")

	short := longBuild(t, ts, baseImage, "short-log", "echo short")
	shortPages := pageTimes(t, ts, short, 1)
	dbBefore, rssBefore := fileSize(t, dbPath), rssOf(pid)

	long := longBuild(t, ts, baseImage, "long-log", fmt.Sprintf("yes x | head -n %d", lines))
	dbAfter, rssBuilt := fileSize(t, dbPath), rssOf(pid)
	longPages := pageTimes(t, ts, long, maxEntries-10)
	rssPaged := rssOf(pid)

	var kept []e2bapi.BuildLogEntry
	for {
		page := ts.status(long.TemplateID, long.BuildID, "?logsOffset="+strconv.Itoa(len(kept))).LogEntries
		if len(page) == 0 {
			break
		}
		kept = append(kept, page...)
	}
	t.Logf("database: %d bytes before the long build, %d after (+%d) for %d lines; %d entries kept",
		dbBefore, dbAfter, dbAfter-dbBefore, lines, len(kept))
	t.Logf("one-entry page, mean of %d: short log %s, long log %s", pageRounds, shortPages, longPages)
	t.Logf("server RSS: %s before the long build, %s after it, %s after paging its log", rssBefore, rssBuilt, rssPaged)

	// Before the bound, these lines grew the database by 80 MiB.
	if growth := dbAfter - dbBefore; growth > 16<<20 {
		t.Errorf("the database grew by %d bytes, want the bound's worth", growth)
	}
	if len(kept) != maxEntries+1 {
		t.Fatalf("%d entries kept, want %d and the marker", len(kept), maxEntries)
	}
	marker := kept[maxEntries/2]
	if marker.Level != e2bapi.LogWarn || !strings.Contains(marker.Message, "log entries (") || !strings.Contains(marker.Message, "dropped here") {
		t.Errorf("entry %d = %+v, want the marker of what was dropped", maxEntries/2, marker)
	}
	if last := kept[len(kept)-1]; last.Step != "finalize" {
		t.Errorf("the last entry kept = %+v, want the build's own last line", last)
	}
	if n := strings.Count(joinMessages(kept), "x\n"); n < maxEntries/2 || n >= maxEntries {
		t.Errorf("%d of the step's lines kept, want most of the bound", n)
	}
	var back e2bapi.TemplateBuildLogsResponse
	ts.call("GET", "/templates/"+long.TemplateID+"/builds/"+long.BuildID+"/logs?direction=backward&limit=1", nil, http.StatusOK, &back)
	if len(back.Logs) != 1 || back.Logs[0] != kept[len(kept)-1] {
		t.Errorf("the newest entry by /logs = %+v, want %+v", back.Logs, kept[len(kept)-1])
	}
}

const pageRounds = 50

// longBuild builds a template of one RUN step and waits up to five minutes.
func longBuild(t *testing.T, ts *testServer, baseImage, name, command string) e2bapi.TemplateRequestResponseV3 {
	t.Helper()
	reg := ts.register(name)
	ts.start(reg, e2bapi.TemplateBuildStartV2{FromImage: baseImage, Steps: []e2bapi.TemplateStep{run(command)}})
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		info := ts.status(reg.TemplateID, reg.BuildID, "?limit=1")
		if info.Status == e2bapi.BuildReady {
			return reg
		}
		if info.Status == e2bapi.BuildError || time.Now().After(deadline) {
			t.Fatalf("build %s: %s %+v", name, info.Status, info.Reason)
		}
	}
}

// pageTimes is the mean time of a one-entry page from each logs endpoint
// of the build: the status at offset, /logs forward and backward, and
// /logs through a level filter that matches nothing (a scan of the kept
// log).
func pageTimes(t *testing.T, ts *testServer, reg e2bapi.TemplateRequestResponseV3, offset int) string {
	t.Helper()
	base := "/templates/" + reg.TemplateID + "/builds/" + reg.BuildID
	var out []string
	for _, path := range []string{"/status?limit=1&logsOffset=" + strconv.Itoa(offset), "/logs?limit=1", "/logs?limit=1&direction=backward", "/logs?limit=1&level=error"} {
		ts.call("GET", base+path, nil, http.StatusOK, nil) // warm up
		start := time.Now()
		for range pageRounds {
			ts.call("GET", base+path, nil, http.StatusOK, nil)
		}
		out = append(out, fmt.Sprintf("%s %s", path, time.Since(start)/pageRounds))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

func joinMessages(entries []e2bapi.BuildLogEntry) string {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e.Message + "\n")
	}
	return b.String()
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// rssOf is the resident set of process pid as /proc reports it, or "n/a"
// where there is no /proc.
func rssOf(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "n/a"
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.Join(strings.Fields(rest), " ")
		}
	}
	return "n/a"
}
