//go:build linux

package localserver

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

func boolp(b bool) *bool { return &b }

func (ts *testServer) detail(id string) e2b.SandboxDetail {
	ts.t.Helper()
	var d e2b.SandboxDetail
	ts.call("GET", "/sandboxes/"+id, nil, http.StatusOK, &d)
	return d
}

func (ts *testServer) listIDs(path string) []string {
	ts.t.Helper()
	var list []e2b.ListedSandbox
	ts.call("GET", path, nil, http.StatusOK, &list)
	var ids []string
	for _, sb := range list {
		ids = append(ids, sb.SandboxID+"="+sb.State)
	}
	return ids
}

// A paused sandbox is frozen, kept past its end until killed, listed as
// paused by v2 only, refuses the calls only a running sandbox takes, and
// connect resumes it (201) with a fresh end.
func TestSandboxPauseAndConnect(t *testing.T) {
	clock := newTestClock()
	eng := newFakeEngine(t)
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.Now = clock.Now }})
	ts.build("app")
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app", Timeout: int32p(10)})

	clock.Advance(2 * time.Second)
	pausedAt := clock.Now()
	ts.call("POST", "/sandboxes/"+sb.SandboxID+"/pause", nil, http.StatusNoContent, nil)
	if !eng.isPaused(sb.SandboxID) {
		t.Fatal("the sandbox's container is not paused")
	}
	ts.expectError("POST", "/sandboxes/"+sb.SandboxID+"/pause", e2b.SandboxPauseRequest{Memory: boolp(true)}, http.StatusConflict, "already paused")
	if d := ts.detail(sb.SandboxID); d.State != "paused" || !d.EndAt.Equal(pausedAt) || d.Lifecycle == nil || d.Lifecycle.OnTimeout != "kill" {
		t.Errorf("paused detail = %+v, want state paused, endAt %v, onTimeout kill", d, pausedAt)
	}
	eng.mu.Lock()
	deadline := eng.deadlines[sb.SandboxID]
	eng.mu.Unlock()
	if !deadline.IsZero() {
		t.Errorf("a paused sandbox's container ends itself at %v, want no end", deadline)
	}

	// Past its end, a paused sandbox stays: nothing kills it but a kill.
	clock.Advance(time.Minute)
	time.Sleep(50 * time.Millisecond) // reaper rounds (every 5 ms)
	if got := ts.listIDs("/v2/sandboxes"); !slices.Equal(got, []string{sb.SandboxID + "=paused"}) {
		t.Errorf("GET /v2/sandboxes = %v, want the paused sandbox", got)
	}
	if got := ts.listIDs("/v2/sandboxes?state=running"); len(got) != 0 {
		t.Errorf("GET /v2/sandboxes?state=running = %v, want none", got)
	}
	if got := ts.listIDs("/v2/sandboxes?state=running,paused"); len(got) != 1 {
		t.Errorf("GET /v2/sandboxes?state=running,paused = %v, want the sandbox", got)
	}
	if got := ts.listIDs("/sandboxes"); len(got) != 0 {
		t.Errorf("GET /sandboxes = %v, want none: v1 lists running sandboxes only", got)
	}
	ts.expectError("POST", "/sandboxes/"+sb.SandboxID+"/timeout", e2b.SandboxTimeoutRequest{Timeout: 100}, http.StatusNotFound, "is paused")
	ts.expectError("POST", "/sandboxes/"+sb.SandboxID+"/refreshes", e2b.SandboxRefreshRequest{Duration: int32p(100)}, http.StatusNotFound, "is paused")
	expectError(t, ts.request("GET", "/health", nil, "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983"), http.StatusBadGateway, "is paused")

	var resumed e2b.Sandbox
	ts.call("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", e2b.ConnectSandbox{Timeout: int32p(60)}, http.StatusCreated, &resumed)
	if resumed.SandboxID != sb.SandboxID || resumed.EnvdAccessToken != sb.EnvdAccessToken {
		t.Errorf("connect = %+v, want the sandbox with its token", resumed)
	}
	if eng.isPaused(sb.SandboxID) {
		t.Error("connect left the container paused")
	}
	d := ts.detail(sb.SandboxID)
	eng.mu.Lock()
	deadline = eng.deadlines[sb.SandboxID]
	eng.mu.Unlock()
	if d.State != "running" || !d.EndAt.Equal(clock.Now().Add(time.Minute)) || !deadline.Equal(d.EndAt) {
		t.Errorf("resumed detail = %+v (container end %v), want running until now+60s", d, deadline)
	}
	ts.call("POST", "/sandboxes/"+sb.SandboxID+"/connect", e2b.ConnectSandbox{Timeout: int32p(60)}, http.StatusOK, nil)

	// The deprecated resume: 201 for a paused sandbox, 409 for a running one.
	ts.expectError("POST", "/sandboxes/"+sb.SandboxID+"/resume", nil, http.StatusConflict, "already running")
	ts.call("POST", "/sandboxes/"+sb.SandboxID+"/pause", nil, http.StatusNoContent, nil)
	ts.call("POST", "/sandboxes/"+sb.SandboxID+"/resume", e2b.ResumedSandbox{Timeout: int32p(30)}, http.StatusCreated, nil)
	if d := ts.detail(sb.SandboxID); !d.EndAt.Equal(clock.Now().Add(30 * time.Second)) {
		t.Errorf("endAt after resume = %v, want now+30s", d.EndAt)
	}

	// A paused sandbox is killed like any other.
	ts.call("POST", "/sandboxes/"+sb.SandboxID+"/pause", nil, http.StatusNoContent, nil)
	ts.call("DELETE", "/sandboxes/"+sb.SandboxID, nil, http.StatusNoContent, nil)
	ts.expectError("GET", "/sandboxes/"+sb.SandboxID, nil, http.StatusNotFound, "not found")
	ts.expectError("POST", "/sandboxes/"+sb.SandboxID+"/pause", nil, http.StatusNotFound, "not found")
	ts.expectError("POST", "/sandboxes/inope/resume", nil, http.StatusNotFound, "not found")
}

// lifecycle onTimeout "pause" (autoPause): the sandbox is paused at its
// end, not killed, and its container never ends itself.
func TestSandboxOnTimeoutPause(t *testing.T) {
	clock := newTestClock()
	eng := newFakeEngine(t)
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.Now = clock.Now }})
	ts.build("app")
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app", Timeout: int32p(10), AutoPause: boolp(true)})
	if d := ts.detail(sb.SandboxID); d.Lifecycle == nil || d.Lifecycle.OnTimeout != "pause" {
		t.Errorf("lifecycle = %+v, want onTimeout pause", d.Lifecycle)
	}
	eng.mu.Lock()
	deadline, set := eng.deadlines[sb.SandboxID]
	eng.mu.Unlock()
	if !set || !deadline.IsZero() {
		t.Errorf("container end = %v (set %v), want none", deadline, set)
	}
	clock.Advance(10 * time.Second)
	for i := 0; ts.detail(sb.SandboxID).State != "paused"; i++ {
		if i == 1000 {
			t.Fatal("the sandbox was not paused at its end")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !eng.isPaused(sb.SandboxID) {
		t.Error("the sandbox is recorded paused but its container is not")
	}
	select {
	case id := <-eng.stopped:
		t.Fatalf("sandbox %s was stopped", id)
	default:
	}
	ts.call("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", nil, http.StatusCreated, nil)

	ts.expectError("POST", "/v2/sandboxes", e2b.NewSandbox{TemplateID: "app", AutoPauseMemory: boolp(false)}, http.StatusBadRequest, "only applies when autoPause is true")
	ts.expectError("POST", "/v2/sandboxes", e2b.NewSandbox{TemplateID: "app", AutoPause: boolp(true), AutoPauseMemory: boolp(false), AutoResume: &e2b.SandboxAutoResume{Enabled: true}}, http.StatusBadRequest, "cannot be combined with autoResume")
}

// lifecycle autoResume: traffic through the sandbox proxy resumes a paused
// sandbox for the creation's timeout; without it the proxy answers 502.
func TestSandboxAutoResume(t *testing.T) {
	clock := newTestClock()
	eng := newFakeEngine(t)
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.Now = clock.Now }})
	ts.build("app")
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app", Timeout: int32p(30), AutoPause: boolp(true), AutoResume: &e2b.SandboxAutoResume{Enabled: true}})
	if d := ts.detail(sb.SandboxID); d.Lifecycle == nil || !d.Lifecycle.AutoResume {
		t.Errorf("lifecycle = %+v, want autoResume", d.Lifecycle)
	}
	ts.call("POST", "/sandboxes/"+sb.SandboxID+"/pause", nil, http.StatusNoContent, nil)
	clock.Advance(time.Hour)

	resp := ts.request("GET", "/health", nil, "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983")
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("envd's health through the proxy of an auto-resumed sandbox = %d, want 204", resp.StatusCode)
	}
	if d := ts.detail(sb.SandboxID); d.State != "running" || !d.EndAt.Equal(clock.Now().Add(30*time.Second)) || eng.isPaused(sb.SandboxID) {
		t.Errorf("after traffic: %+v, want running until now+30s", d)
	}
}

// Paused sandboxes, and those that pause at their end, outlive the server:
// Close pauses the latter and leaves both, the next start keeps them.
func TestPausedSandboxesOutliveTheServer(t *testing.T) {
	dataDir := t.TempDir()
	eng := newFakeEngine(t)
	ts := startServer(t, eng, serverOptions{dataDir: dataDir, skipCleanup: true})
	ts.build("app")
	paused := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app"})
	ts.call("POST", "/sandboxes/"+paused.SandboxID+"/pause", nil, http.StatusNoContent, nil)
	autoPause := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app", AutoPause: boolp(true)})
	killed := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app"})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := ts.Server.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if id := <-eng.stopped; id != killed.SandboxID {
		t.Errorf("close stopped %s, want only %s", id, killed.SandboxID)
	}
	if !eng.isPaused(autoPause.SandboxID) {
		t.Error("close did not pause the sandbox that pauses at its end")
	}

	again := startServer(t, eng, serverOptions{dataDir: dataDir})
	eng.mu.Lock()
	kept := slices.Sorted(slices.Values(eng.keptOrphans))
	eng.mu.Unlock()
	want := slices.Sorted(slices.Values([]string{paused.SandboxID, autoPause.SandboxID}))
	if !slices.Equal(kept, want) {
		t.Errorf("containers kept at start = %v, want %v", kept, want)
	}
	if got := again.listIDs("/v2/sandboxes"); len(got) != 2 {
		t.Errorf("sandboxes after the restart = %v, want the two paused ones", got)
	}
	again.call("POST", "/v2/sandboxes/"+paused.SandboxID+"/connect", nil, http.StatusCreated, nil)
}
