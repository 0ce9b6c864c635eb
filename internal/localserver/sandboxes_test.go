//go:build linux

package localserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/builds"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

func (ts *testServer) createSandbox(path string, req e2b.NewSandbox) e2b.Sandbox {
	ts.t.Helper()
	var sb e2b.Sandbox
	ts.call("POST", path, req, http.StatusCreated, &sb)
	return sb
}

func int32p(n int32) *int32 { return &n }

func TestSandboxLifecycleAndProxy(t *testing.T) {
	eng := newFakeEngine(t)
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.Domain = "localhost:1" }})
	reg, info := ts.build("app", e2b.TemplateStep{Type: "ENV", Args: []string{"FROM_BUILD", "b"}})
	if info.Status != "ready" {
		t.Fatal(info)
	}
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app", Metadata: map[string]string{"m": "1"}, EnvVars: map[string]string{"K": "V"}})
	if !strings.HasPrefix(sb.SandboxID, "i") || len(sb.SandboxID) != 21 || sb.TemplateID != reg.TemplateID || sb.Alias != "app" ||
		sb.EnvdVersion != "0.6.13" || len(sb.EnvdAccessToken) != len(rand.Text()) || sb.ClientID != e2b.ClientID || sb.Domain == nil || *sb.Domain != "localhost:1" {
		t.Fatalf("sandbox = %+v", sb)
	}

	var detail e2b.SandboxDetail
	ts.call("GET", "/sandboxes/"+sb.SandboxID, nil, 200, &detail)
	if detail.State != "running" || detail.EnvdAccessToken != sb.EnvdAccessToken || detail.Metadata["m"] != "1" ||
		detail.EndAt.Sub(detail.StartedAt) != 300*time.Second {
		t.Errorf("detail = %+v, want running with a 300 s timeout", detail)
	}
	var tmpl e2b.TemplateWithBuilds
	ts.call("GET", "/templates/"+reg.TemplateID, nil, 200, &tmpl)
	if tmpl.SpawnCount != 1 || tmpl.LastSpawnedAt == nil {
		t.Errorf("spawn count %d last %v, want 1 and set", tmpl.SpawnCount, tmpl.LastSpawnedAt)
	}

	// A command through the proxy, addressed by headers as the SDK does.
	client, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", `echo "$K $FROM_BUILD"; echo oops >&2; exit 3`}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "V b\n" || string(res.Stderr) != "oops\n" || res.ExitCode != 3 {
		t.Errorf("run = stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}
	// Output streams through the proxy as it is written: the input the
	// command waits for is sent only once its first line has arrived.
	stdin, feed := io.Pipe()
	var fed sync.Once
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	res, err = client.Run(ctx, envdclient.RunRequest{
		Cmd: "/bin/sh", Args: []string{"-c", `echo first; read x; echo "got $x"`}, Stdin: stdin,
		OnOutput: func(_ envdclient.Stream, chunk []byte) {
			if strings.Contains(string(chunk), "first") {
				fed.Do(func() {
					go func() {
						// A failed write shows as the missing "got second" below.
						_, _ = io.WriteString(feed, "second\n")
						feed.Close()
					}()
				})
			}
		},
	})
	if err != nil {
		t.Fatalf("streaming run (a buffering proxy would hang here): %v", err)
	}
	if string(res.Stdout) != "first\ngot second\n" {
		t.Errorf("streaming run stdout = %q", res.Stdout)
	}
	// Addressed by Host; the wrong token is envd's 401, passed through.
	hostReq := func(host, token string) *http.Response {
		req, _ := http.NewRequest("GET", ts.URL+"/envs", nil)
		req.Host = host
		if token != "" {
			req.Header.Set("X-Access-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := hostReq("49983-"+sb.SandboxID+".localhost:1", sb.EnvdAccessToken)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"K":"V"`) {
		t.Errorf("GET /envs by Host = %d %s", resp.StatusCode, body)
	}
	expectError(t, hostReq("49983-"+sb.SandboxID+".localhost", "wrong"), 401, "access token")
	expectError(t, hostReq("8080-"+sb.SandboxID+".localhost", ""), 502, "port 8080")
	expectError(t, hostReq("49983-iunknown.localhost", ""), 502, "sandbox 'iunknown' not found")

	// Lists, with the metadata filter and paging.
	other := ts.createSandbox("/sandboxes", e2b.NewSandbox{TemplateID: "app:default", Metadata: map[string]string{"m": "2"}})
	if other.EnvdAccessToken != "" {
		t.Errorf("v1 sandbox without secure got a token")
	}
	var listed []e2b.ListedSandbox
	ts.call("GET", "/sandboxes", nil, 200, &listed)
	if len(listed) != 2 {
		t.Errorf("list = %d sandboxes, want 2", len(listed))
	}
	ts.call("GET", "/v2/sandboxes?metadata=m%3D2", nil, 200, &listed)
	if len(listed) != 1 || listed[0].SandboxID != other.SandboxID {
		t.Errorf("metadata filter = %+v", listed)
	}
	h := ts.call("GET", "/v2/sandboxes?limit=1", nil, 200, &listed)
	if len(listed) != 1 || h.Get("X-Next-Token") == "" {
		t.Errorf("page of 1 = %d, next %q", len(listed), h.Get("X-Next-Token"))
	}
	ts.call("GET", "/v2/sandboxes?state=paused", nil, 200, &listed)
	if len(listed) != 0 {
		t.Errorf("paused sandboxes = %d, want 0", len(listed))
	}
}

func TestSandboxRequestErrors(t *testing.T) {
	eng := newFakeEngine(t)
	ts := startServer(t, eng)
	ts.build("app")
	eng.mu.Lock()
	eng.startErr = errors.New("no space left for the container")
	eng.mu.Unlock()
	resp := ts.request("POST", "/v2/sandboxes", e2b.NewSandbox{TemplateID: "app"})
	var env e2b.Error
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || resp.StatusCode != 500 || env.Code != 500 ||
		env.ErrorCode != "sandbox_create_failed" || !strings.Contains(env.Message, "no space left") {
		t.Errorf("engine failure = %d %+v %v", resp.StatusCode, env, err)
	}
	resp.Body.Close()
	eng.mu.Lock()
	eng.startErr = nil
	eng.mu.Unlock()
	ts.expectError("POST", "/v2/sandboxes", e2b.NewSandbox{TemplateID: "nope"}, 404, "template 'nope' not found")
	ts.expectError("POST", "/v2/sandboxes", e2b.NewSandbox{TemplateID: "app:v9"}, 404, "tag 'v9'")
	ts.expectError("POST", "/sandboxes", e2b.NewSandbox{TemplateID: "app", Timeout: int32p(0)}, 400, "timeout 0")
	ts.expectError("POST", "/v2/sandboxes", e2b.NewSandbox{TemplateID: "app", Timeout: int32p(90000)}, 400, "from 1 to 86400 seconds")
	expectError(t, ts.direct("POST", "/v2/sandboxes", []byte(`{"templateID":"app","timeout":0}`)), 400, "timeout 0")
	ts.expectError("GET", "/sandboxes/inope", nil, 404, "sandbox 'inope' not found")
	ts.expectError("DELETE", "/sandboxes/inope", nil, 404, "not found")
	ts.expectError("POST", "/sandboxes/inope/timeout", e2b.SandboxTimeoutRequest{Timeout: 5}, 404, "not found")
	expectError(t, ts.direct("GET", "/sandboxes/I-BAD", nil), 400, "may contain only")
}

func TestSandboxTimeoutIsEnforced(t *testing.T) {
	clock := newTestClock()
	eng := newFakeEngine(t)
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.Now = clock.Now }})
	ts.build("app")
	short := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app", Timeout: int32p(10)})
	long := ts.createSandbox("/sandboxes", e2b.NewSandbox{TemplateID: "app"}) // v1 default: 15 s
	ts.call("POST", "/sandboxes/"+long.SandboxID+"/timeout", e2b.SandboxTimeoutRequest{Timeout: 100}, 204, nil)
	var detail e2b.SandboxDetail
	ts.call("GET", "/sandboxes/"+long.SandboxID, nil, 200, &detail)
	if !detail.EndAt.Equal(clock.Now().Add(100 * time.Second)) {
		t.Errorf("endAt after timeout = %v, want now+100s", detail.EndAt)
	}

	clock.Advance(11 * time.Second)
	select {
	case id := <-eng.stopped:
		if id != short.SandboxID {
			t.Fatalf("reaper stopped %s, want %s", id, short.SandboxID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the expired sandbox was not stopped within 30 s")
	}
	// The engine stops the container before the record goes; wait for both.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if all, err := ts.Server.Store().Sandboxes.Sandboxes(); err == nil && !slices.ContainsFunc(all, func(sb store.Sandbox) bool { return sb.ID == short.SandboxID }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expired sandbox is still recorded after 30 s")
		}
	}
	ts.expectError("GET", "/sandboxes/"+short.SandboxID, nil, 404, "not found")
	// One more sweep at this time leaves the other alone.
	ts.Server.sandboxes.ReapExpired(t.Context())
	ts.call("GET", "/sandboxes/"+long.SandboxID, nil, 200, &detail)

	ts.call("DELETE", "/sandboxes/"+long.SandboxID, nil, 204, nil)
	if id := <-eng.stopped; id != long.SandboxID {
		t.Errorf("DELETE stopped %s", id)
	}
	ts.expectError("DELETE", "/sandboxes/"+long.SandboxID, nil, 404, "not found")
	// The proxy forgets it too.
	req := ts.request("GET", "/health", nil, "E2b-Sandbox-Id", long.SandboxID, "E2b-Sandbox-Port", "49983")
	expectError(t, req, 502, "not found")
}

func TestDeleteTemplate(t *testing.T) {
	eng := newFakeEngine(t)
	ts := startServer(t, eng)
	first, _ := ts.build("app")
	second, _ := ts.build("app")
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app"})
	ts.expectError("DELETE", "/templates/app", nil, 400, "running or paused sandboxes use it")
	ts.call("DELETE", "/sandboxes/"+sb.SandboxID, nil, 204, nil)
	ts.call("DELETE", "/templates/local%2Fapp", nil, 204, nil)
	eng.mu.Lock()
	removed := slices.Clone(eng.removedImages)
	eng.mu.Unlock()
	slices.Sort(removed)
	want := []string{"fake/" + first.TemplateID + ":" + first.BuildID, "fake/" + first.TemplateID + ":" + second.BuildID}
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("removed images %v, want %v", removed, want)
	}
	ts.expectError("GET", "/templates/"+first.TemplateID, nil, 404, "not found")
	ts.expectError("DELETE", "/templates/app", nil, 404, "not found")
	ts.expectError("GET", "/templates/aliases/app", nil, 404, "not found")
	var list []e2b.Template
	ts.call("GET", "/templates", nil, 200, &list)
	if len(list) != 0 {
		t.Errorf("deleted template still listed: %+v", list)
	}
}

// Close fails running builds and stops sandboxes; a new server on the same
// data dir finds every template, build and tag again.
func TestCloseAndReopen(t *testing.T) {
	dataDir := t.TempDir()
	eng := newFakeEngine(t)
	ts := startServer(t, eng, serverOptions{dataDir: dataDir, skipCleanup: true})
	good, _ := ts.build("app", run("echo"))
	running := ts.register("app", "next")
	ts.start(running, e2b.TemplateBuildStartV2{FromImage: "x", Steps: []e2b.TemplateStep{run("block")}})
	lastBuildSpec(t, eng, running.BuildID)
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app"})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := ts.Server.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if id := <-eng.stopped; id != sb.SandboxID {
		t.Errorf("close stopped %s, want %s", id, sb.SandboxID)
	}

	again := startServer(t, newFakeEngine(t), serverOptions{dataDir: dataDir})
	info := again.status(running.TemplateID, running.BuildID, "")
	if info.Status != "error" || info.Reason.Message != builds.ReasonShutdown {
		t.Errorf("build running at close = %+v, want error %q", info, builds.ReasonShutdown)
	}
	// The list names each tag's newest assignment, the failed build's too (as
	// E2B's); the template still resolves to the good build.
	var tags []e2b.TemplateTag
	again.call("GET", "/templates/app/tags", nil, 200, &tags)
	if len(tags) != 2 || tags[0].Tag != "default" || tags[0].BuildID != good.BuildID || tags[1].Tag != "next" || tags[1].BuildID != running.BuildID {
		t.Errorf("tags after reopen = %+v, want default at %s and next at %s", tags, good.BuildID, running.BuildID)
	}
	again.expectTemplateBuild(running.TemplateID, good.BuildID)
	var sandboxes []e2b.ListedSandbox
	again.call("GET", "/sandboxes", nil, 200, &sandboxes)
	if len(sandboxes) != 0 {
		t.Errorf("sandboxes after close = %+v", sandboxes)
	}
}

// After a crash (state left as it was), start-up fails builds that were
// running, forgets expired sandboxes and keeps only live ones' containers.
func TestStartAfterCrash(t *testing.T) {
	dataDir := t.TempDir()
	clock := newTestClock()
	st, err := store.Open(filepath.Join(dataDir, "state.db"), DefaultTeamSlug, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := st.Catalog.RegisterBuild(store.RegisterRequest{Name: "app", CPUCount: 2, MemoryMB: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Catalog.StartBuild(reg.Template.ID, reg.Build.ID, store.BuildRequest{FromImage: "x"}); err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	for _, sb := range []store.Sandbox{
		{ID: "ilive", TemplateID: reg.Template.ID, StartedAt: now, EndAt: now.Add(time.Minute), CPUCount: 2, MemoryMB: 1024},
		{ID: "iexpired", TemplateID: reg.Template.ID, StartedAt: now, EndAt: now.Add(-time.Second)},
		// Its create never answered: the server died before it ran.
		{ID: "istarting", TemplateID: reg.Template.ID, StartedAt: now, EndAt: now.Add(time.Minute), State: store.StateStarting},
	} {
		if err := st.Sandboxes.CreateSandbox(sb); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	eng := newFakeEngine(t)
	for _, id := range []string{"ilive", "iexpired", "istarting", "iorphan"} {
		eng.sandboxes[id] = func() error { return nil }
	}
	ts := startServer(t, eng, serverOptions{dataDir: dataDir, configure: func(c *Config) { c.Now = clock.Now }})
	info := ts.status(reg.Template.ID, reg.Build.ID, "")
	if info.Status != "error" || info.Reason.Message != builds.ReasonRestarted {
		t.Errorf("interrupted build = %+v", info)
	}
	eng.mu.Lock()
	kept, left := slices.Clone(eng.keptOrphans), len(eng.sandboxes)
	eng.mu.Unlock()
	if !slices.Equal(kept, []string{"ilive"}) || left != 1 {
		t.Errorf("kept %v, engine has %d containers; want only ilive", kept, left)
	}
	ts.call("GET", "/sandboxes/ilive", nil, 200, nil)
	ts.expectError("GET", "/sandboxes/iexpired", nil, 404, "not found")
	ts.expectError("GET", "/sandboxes/istarting", nil, 404, "not found")
}

// TestSandboxConnectAndRefresh covers Sandbox.connect (v2 with an optional body, v1 with a
// required timeout) and refreshes: both only ever move a sandbox's end later.
func TestSandboxConnectAndRefresh(t *testing.T) {
	clock := newTestClock()
	eng := newFakeEngine(t)
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.Now = clock.Now }})
	ts.build("app")
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app", Timeout: int32p(10)})
	endAt := func() time.Time {
		t.Helper()
		var detail e2b.SandboxDetail
		ts.call("GET", "/sandboxes/"+sb.SandboxID, nil, 200, &detail)
		// The container's own deadline moves with the sandbox's end.
		eng.mu.Lock()
		deadline := eng.deadlines[sb.SandboxID]
		eng.mu.Unlock()
		if !deadline.Equal(detail.EndAt) {
			t.Errorf("the container's deadline is %v, the sandbox's end %v", deadline, detail.EndAt)
		}
		return detail.EndAt
	}
	start := clock.Now()

	var connected e2b.Sandbox
	ts.call("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", nil, 200, &connected)
	if connected.SandboxID != sb.SandboxID || connected.EnvdAccessToken != sb.EnvdAccessToken || connected.EnvdVersion != sb.EnvdVersion {
		t.Errorf("connect = %+v, want the sandbox %+v", connected, sb)
	}
	if got := endAt(); !got.Equal(start.Add(300 * time.Second)) {
		t.Errorf("endAt after a v2 connect without a body = %v, want now+300s", got)
	}
	ts.call("POST", "/sandboxes/"+sb.SandboxID+"/connect", e2b.ConnectSandbox{Timeout: int32p(60)}, 200, nil)
	if got := endAt(); !got.Equal(start.Add(300 * time.Second)) {
		t.Errorf("endAt after connecting with a shorter timeout = %v, want it unchanged", got)
	}
	ts.call("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", e2b.ConnectSandbox{Timeout: int32p(900)}, 200, nil)
	if got := endAt(); !got.Equal(start.Add(900 * time.Second)) {
		t.Errorf("endAt after connecting for 900 s = %v, want now+900s", got)
	}

	clock.Advance(800 * time.Second)
	ts.call("POST", "/sandboxes/"+sb.SandboxID+"/refreshes", e2b.SandboxRefreshRequest{Duration: int32p(3600)}, 204, nil)
	if got := endAt(); !got.Equal(clock.Now().Add(3600 * time.Second)) {
		t.Errorf("endAt after a refresh of 3600 s = %v, want now+3600s", got)
	}
	ts.call("POST", "/sandboxes/"+sb.SandboxID+"/refreshes", nil, 204, nil)
	if got := endAt(); !got.Equal(clock.Now().Add(3600 * time.Second)) {
		t.Errorf("endAt after an empty refresh = %v, want it unchanged", got)
	}

	expectError(t, ts.direct("POST", "/sandboxes/"+sb.SandboxID+"/connect", []byte(`{}`)), 400, "timeout is required")
	ts.expectError("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", e2b.ConnectSandbox{Timeout: int32p(1 << 30)}, 400, "timeout 1073741824")
	ts.expectError("POST", "/v2/sandboxes/inope/connect", nil, 404, "not found")
	ts.expectError("POST", "/sandboxes/inope/refreshes", e2b.SandboxRefreshRequest{Duration: int32p(5)}, 404, "not found")
	expectError(t, ts.direct("POST", "/sandboxes/"+sb.SandboxID+"/refreshes", []byte(`{"duration":3601}`)), 400, "duration 3601")
}

// From its end on, a sandbox is gone in every answer, even before the
// reaper has stopped it: never "running" with endAt in the past.
func TestSandboxIsGoneAtItsEnd(t *testing.T) {
	clock := newTestClock()
	ts := startServer(t, newFakeEngine(t), serverOptions{configure: func(c *Config) {
		c.Now = clock.Now
		c.ReapInterval = time.Hour // the reaper is late
	}})
	ts.build("app")
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app", Timeout: int32p(10)})
	clock.Advance(10 * time.Second)
	ts.expectError("GET", "/sandboxes/"+sb.SandboxID, nil, 404, "not found")
	var list []e2b.ListedSandbox
	ts.call("GET", "/sandboxes", nil, 200, &list)
	if len(list) != 0 {
		t.Errorf("GET /sandboxes = %+v, want none", list)
	}
	ts.call("GET", "/v2/sandboxes", nil, 200, &list)
	if len(list) != 0 {
		t.Errorf("GET /v2/sandboxes = %+v, want none", list)
	}
	ts.expectError("POST", "/sandboxes/"+sb.SandboxID+"/timeout", e2b.SandboxTimeoutRequest{Timeout: 100}, 404, "not found")
	ts.expectError("POST", "/sandboxes/"+sb.SandboxID+"/refreshes", e2b.SandboxRefreshRequest{Duration: int32p(100)}, 404, "not found")
	ts.expectError("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", nil, 404, "not found")
	expectError(t, ts.request("GET", "/health", nil, "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983"), 502, "not found")
}
