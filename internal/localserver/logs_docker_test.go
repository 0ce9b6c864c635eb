//go:build linux

package localserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// The tests in this file need a Docker engine (see server_docker_test.go).

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

	var kept []e2b.BuildLogEntry
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
	if marker.Level != e2b.LogWarn || !strings.Contains(marker.Message, "log entries (") || !strings.Contains(marker.Message, "dropped here") {
		t.Errorf("entry %d = %+v, want the marker of what was dropped", maxEntries/2, marker)
	}
	if last := kept[len(kept)-1]; last.Step != "finalize" {
		t.Errorf("the last entry kept = %+v, want the build's own last line", last)
	}
	if n := strings.Count(joinMessages(kept), "x\n"); n < maxEntries/2 || n >= maxEntries {
		t.Errorf("%d of the step's lines kept, want most of the bound", n)
	}
	var back e2b.TemplateBuildLogsResponse
	ts.call("GET", "/templates/"+long.TemplateID+"/builds/"+long.BuildID+"/logs?direction=backward&limit=1", nil, http.StatusOK, &back)
	if len(back.Logs) != 1 || back.Logs[0] != kept[len(kept)-1] {
		t.Errorf("the newest entry by /logs = %+v, want %+v", back.Logs, kept[len(kept)-1])
	}
}

// A sandbox's root that floods envd's output (the container's log) leaves
// the sandbox's stored log within the bound, with the marker; the first
// request after the flood takes it in, later pages cost what a page does.
// The figures are printed.
func TestDockerSandboxLogIsBounded(t *testing.T) {
	const maxEntries, lines = 1000, 100_000
	eng, baseImage := dockerEngine(t)
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.LogBound.MaxEntries = maxEntries }})
	if _, info := ts.buildFrom(baseImage, "flood"); info.Status != "ready" {
		t.Fatalf("build = %+v", info)
	}
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "flood"})
	t.Cleanup(func() { _ = eng.StopSandbox(context.WithoutCancel(t.Context()), sb.SandboxID) })
	client, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
	if err != nil {
		t.Fatal(err)
	}
	// Timed without the contract check, whose cost is the test's.
	direct := httptest.NewServer(ts.Server.Handler())
	t.Cleanup(direct.Close)
	url := direct.URL + "/v2/sandboxes/" + sb.SandboxID + "/logs?limit=1"
	page := func() {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		req.Header.Set("X-API-Key", testAPIKey)
		resp, err := direct.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", url, resp.Status)
		}
	}
	pages := func() time.Duration {
		start := time.Now()
		for range pageRounds {
			page()
		}
		return time.Since(start) / pageRounds
	}
	page()
	short := pages()
	res, err := client.Run(t.Context(), envdclient.RunRequest{User: "root", Cmd: "/bin/sh", Args: []string{"-c", fmt.Sprintf("yes x | head -n %d > /proc/1/fd/1; echo flood-end > /proc/1/fd/1", lines)}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("flood envd's output: %v %+v %s", err, res, res.Stderr)
	}
	// Docker writes the lines to its log after the command returns: the
	// last line, a page of its own, says they are all there and stored.
	start := time.Now()
	for {
		var last e2b.SandboxLogsV2Response
		ts.call("GET", "/v2/sandboxes/"+sb.SandboxID+"/logs?limit=1", nil, http.StatusOK, &last)
		if len(last.Logs) == 1 && last.Logs[0].Message == "flood-end" {
			break
		}
		// A wait, not a timing: a loaded engine writes 100,000 lines slowly.
		if time.Since(start) > 5*time.Minute {
			t.Fatalf("the flood's last line is not in the sandbox's log after 5 minutes: %+v", last.Logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	taken := time.Since(start)
	t.Logf("v2 one-entry page, mean of %d: %s on the short log; %s after %d lines, once the server took them in (%s)",
		pageRounds, short, pages(), lines, taken)

	kept, err := ts.Server.Store().Sandboxes.SandboxLogPage(sb.SandboxID, store.LogQuery{Cursor: -1, Limit: 10 * maxEntries})
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != maxEntries+1 {
		t.Fatalf("%d entries stored, want %d and the marker", len(kept), maxEntries)
	}
	var warn e2b.SandboxLogsV2Response
	ts.call("GET", "/v2/sandboxes/"+sb.SandboxID+"/logs?level=warn&search=dropped", nil, http.StatusOK, &warn)
	if len(warn.Logs) != 1 || !strings.Contains(warn.Logs[0].Message, "log entries (") {
		t.Errorf("v2 warn entries naming a drop = %+v, want the marker", warn.Logs)
	}
}

const pageRounds = 50

// longBuild builds a template of one RUN step and waits up to five minutes.
func longBuild(t *testing.T, ts *testServer, baseImage, name, command string) e2b.TemplateRequestResponseV3 {
	t.Helper()
	reg := ts.register(name)
	ts.start(reg, e2b.TemplateBuildStartV2{FromImage: baseImage, Steps: []e2b.TemplateStep{run(command)}})
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		info := ts.status(reg.TemplateID, reg.BuildID, "?limit=1")
		if info.Status == e2b.BuildReady {
			return reg
		}
		if info.Status == e2b.BuildError || time.Now().After(deadline) {
			t.Fatalf("build %s: %s %+v", name, info.Status, info.Reason)
		}
	}
}

// pageTimes is the mean time of a one-entry page from each logs endpoint
// of the build: the status at offset, /logs forward and backward, and
// /logs through a level filter that matches nothing (a scan of the kept
// log).
func pageTimes(t *testing.T, ts *testServer, reg e2b.TemplateRequestResponseV3, offset int) string {
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

func joinMessages(entries []e2b.BuildLogEntry) string {
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
