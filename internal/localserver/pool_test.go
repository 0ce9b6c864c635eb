//go:build linux

package localserver

import (
	"context"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/api"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/sandboxes"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// startPoolServer starts a server on eng with the pool's bounds and clock.
func startPoolServer(t *testing.T, eng Engine, pool sandboxes.PoolConfig, clock *testClock, opts ...serverOptions) *testServer {
	t.Helper()
	return startServer(t, eng, append(opts, serverOptions{configure: func(c *Config) {
		c.Pool = pool
		if clock != nil {
			c.Now = clock.Now
		}
	}})...)
}

// pooledIDs waits until no pooled container is starting and returns the
// pooled sandbox IDs by build, each list oldest first.
func (ts *testServer) pooledIDs() map[string][]string {
	ts.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if view := ts.Server.sandboxes.Pool(); view.Starting == 0 {
			return view.Ready
		}
		if time.Now().After(deadline) {
			ts.t.Fatalf("the pool is still starting containers after 30 s")
		}
	}
}

// recordedPool is what the store records of the pool.
func recordedPool(t *testing.T, ts *testServer) []string {
	t.Helper()
	pooled, err := ts.Server.store.Sandboxes.PooledSandboxes()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range pooled {
		ids = append(ids, p.ID)
	}
	slices.Sort(ids)
	return ids
}

func flat(byBuild map[string][]string) []string {
	var ids []string
	for _, list := range byBuild {
		ids = append(ids, list...)
	}
	slices.Sort(ids)
	return ids
}

// The pool keeps PerBuild containers for each build sandboxes were created
// from, Max in all, each recorded, none visible; a create takes one, with
// its own metadata, env and token, and the pool refills.
func TestPoolBoundsAndHandOut(t *testing.T) {
	eng := newFakeEngine(t)
	ts := startPoolServer(t, eng, sandboxes.PoolConfig{PerBuild: 2, Max: 3, Idle: time.Hour}, nil)
	a, _ := ts.build("a", e2b.TemplateStep{Type: "ENV", Args: []string{"FROM_BUILD", "b"}})
	b, _ := ts.build("b")
	if got := ts.pooledIDs(); len(got) != 0 {
		t.Fatalf("a build alone filled the pool: %v", got)
	}

	first := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "a"})
	pooled := ts.pooledIDs()
	if len(pooled[a.BuildID]) != 2 {
		t.Fatalf("pool after a create from a = %v, want 2 of build %s", pooled, a.BuildID)
	}
	if rec := recordedPool(t, ts); !slices.Equal(rec, flat(pooled)) {
		t.Errorf("store records %v, pool holds %v", rec, flat(pooled))
	}
	var stats api.LocalStats
	ts.call("GET", "/_local/stats", nil, http.StatusOK, &stats)
	if stats.Pooled != 2 || stats.PoolReady != 2 {
		t.Errorf("stats pooled %d, ready %d; want 2 and 2", stats.Pooled, stats.PoolReady)
	}
	// Invisible before it is handed out.
	var listed []e2b.ListedSandbox
	ts.call("GET", "/sandboxes", nil, http.StatusOK, &listed)
	if len(listed) != 1 || listed[0].SandboxID != first.SandboxID {
		t.Errorf("listed %+v, want only %s", listed, first.SandboxID)
	}
	hidden := pooled[a.BuildID][0]
	ts.expectError("GET", "/sandboxes/"+hidden, nil, http.StatusNotFound, "not found")
	ts.expectError("DELETE", "/sandboxes/"+hidden, nil, http.StatusNotFound, "not found")
	resp := ts.request("GET", "/health", nil, "E2b-Sandbox-Id", hidden, "E2b-Sandbox-Port", "49983")
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("proxy to a pooled container answered %d, want 502", resp.StatusCode)
	}

	// Build b gets what Max leaves: one.
	ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "b"})
	if got := ts.pooledIDs(); len(got[b.BuildID]) != 1 || len(flat(got)) != 3 {
		t.Fatalf("pool = %v, want 2 of a and 1 of b", got)
	}

	// A create from a hands out the oldest, initialised for this request.
	sb := ts.createSandbox("/sandboxes", e2b.NewSandbox{
		TemplateID: "a", Secure: new(true), Timeout: int32p(60),
		Metadata: map[string]string{"m": "1"}, EnvVars: map[string]string{"K": "V"},
	})
	if sb.SandboxID != hidden || sb.EnvdAccessToken == "" {
		t.Fatalf("create = %+v, want the pooled %s with a token", sb, hidden)
	}
	var detail e2b.SandboxDetail
	ts.call("GET", "/sandboxes/"+sb.SandboxID, nil, http.StatusOK, &detail)
	if detail.Metadata["m"] != "1" || detail.EndAt.Sub(detail.StartedAt) != time.Minute || detail.EnvdAccessToken != sb.EnvdAccessToken {
		t.Errorf("detail = %+v", detail)
	}
	client, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", `echo "$FROM_BUILD $K"`}})
	if err != nil || string(res.Stdout) != "b V\n" {
		t.Errorf("env of the handed-out sandbox: %v %+v", err, res)
	}
	unauthorized, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unauthorized.Run(t.Context(), envdclient.RunRequest{Cmd: "true"}); err == nil {
		t.Error("the handed-out sandbox's envd ran a command without its token")
	}
	// The refill keeps within Max: a has 2 again, b its 1.
	after := ts.pooledIDs()
	if len(flat(after)) != 3 || slices.Contains(flat(after), hidden) || len(after[a.BuildID]) != 2 {
		t.Errorf("pool after the hand-out = %v, want 2 of a (without %s) and 1 of b", after, hidden)
	}
	if rec := recordedPool(t, ts); !slices.Equal(rec, flat(after)) {
		t.Errorf("store records %v, pool holds %v", rec, flat(after))
	}
}

// With any bound 0 the pool keeps nothing and a create starts a fresh
// container.
func TestPoolOff(t *testing.T) {
	for _, pool := range []sandboxes.PoolConfig{{}, {PerBuild: 0, Max: 8, Idle: time.Hour}, {PerBuild: 2, Max: 0, Idle: time.Hour}, {PerBuild: 2, Max: 8}} {
		eng := newFakeEngine(t)
		ts := startPoolServer(t, eng, pool, nil)
		ts.build("a")
		ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "a"})
		ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "a"})
		if got := ts.pooledIDs(); len(got) != 0 {
			t.Errorf("%+v: pool = %v, want none", pool, got)
		}
		eng.mu.Lock()
		n := len(eng.sandboxes)
		eng.mu.Unlock()
		if n != 2 {
			t.Errorf("%+v: the engine runs %d containers, want the 2 sandboxes", pool, n)
		}
	}
}

// A pooled container not handed out within Idle is removed; the pool of a
// build still in use is refilled, that of a build unused for Idle is not.
// Each container's own end (envd's deadline) lies beyond its idle end.
func TestPoolIdleExpiry(t *testing.T) {
	clock := newTestClock()
	eng := newFakeEngine(t)
	ts := startPoolServer(t, eng, sandboxes.PoolConfig{PerBuild: 1, Max: 4, Idle: time.Minute}, clock)
	a, _ := ts.build("a")
	ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "a", Timeout: int32p(3600)})
	first := ts.pooledIDs()[a.BuildID]
	if len(first) != 1 {
		t.Fatalf("pool = %v", first)
	}
	eng.mu.Lock()
	end := eng.warmed[len(eng.warmed)-1].EndAt
	eng.mu.Unlock()
	if want := clock.Now().Add(time.Minute + sandboxes.PoolEndMargin); !end.Equal(want) {
		t.Errorf("pooled container ends at %v, want %v", end, want)
	}

	// Used again within Idle: the expired container is replaced.
	clock.Advance(40 * time.Second)
	taken := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "a", Timeout: int32p(3600)})
	if taken.SandboxID != first[0] {
		t.Fatalf("create = %s, want the pooled %s", taken.SandboxID, first[0])
	}
	second := ts.pooledIDs()[a.BuildID]
	clock.Advance(61 * time.Second) // second's idle end; the build's last use 61 s ago
	waitStopped(t, eng, second[0])
	if got := ts.pooledIDs(); len(got) != 0 {
		t.Errorf("pool of a build unused for Idle = %v, want none", got)
	}
	waitRecords(t, ts)
}

// waitRecords waits until the store records exactly the pooled containers
// the pool holds (the record goes just after the container).
func waitRecords(t *testing.T, ts *testServer) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		held, rec := flat(ts.pooledIDs()), recordedPool(t, ts)
		if slices.Equal(held, rec) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store records %v, the pool holds %v", rec, held)
		}
	}
}

// waitStopped waits until the engine stops the container of id.
func waitStopped(t *testing.T, eng *fakeEngine, id string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case got := <-eng.stopped:
			if got == id {
				return
			}
		case <-timeout:
			t.Fatalf("container %s was not stopped", id)
		}
	}
}

// Deleting a template removes its pooled containers (before its images)
// and their records; closing the server removes the rest.
func TestPoolDeleteTemplateAndClose(t *testing.T) {
	dataDir := t.TempDir()
	eng := newFakeEngine(t)
	ts := startPoolServer(t, eng, sandboxes.PoolConfig{PerBuild: 2, Max: 8, Idle: time.Hour}, nil, serverOptions{dataDir: dataDir, skipCleanup: true})
	a, _ := ts.build("a")
	b, _ := ts.build("b")
	sa := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "a"})
	ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "b"})
	pooled := ts.pooledIDs()
	if len(pooled[a.BuildID]) != 2 || len(pooled[b.BuildID]) != 2 {
		t.Fatalf("pool = %v", pooled)
	}
	ts.call("DELETE", "/sandboxes/"+sa.SandboxID, nil, http.StatusNoContent, nil)
	waitStopped(t, eng, sa.SandboxID)
	ts.call("DELETE", "/templates/a", nil, http.StatusNoContent, nil)
	var stopped []string
	for range 2 {
		stopped = append(stopped, <-eng.stopped)
	}
	slices.Sort(stopped)
	if want := slices.Sorted(slices.Values(pooled[a.BuildID])); !slices.Equal(stopped, want) {
		t.Errorf("deleting the template stopped %v, want its pooled %v", stopped, want)
	}
	if got := ts.pooledIDs(); len(got) != 1 || len(got[b.BuildID]) != 2 {
		t.Errorf("pool after the deletion = %v, want b's 2 alone", got)
	}
	waitRecords(t, ts)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := ts.Server.Close(ctx); err != nil {
		t.Fatal(err)
	}
	eng.mu.Lock()
	left := slices.Collect(func(yield func(string) bool) {
		for id := range eng.sandboxes {
			if !yield(id) {
				return
			}
		}
	})
	eng.mu.Unlock()
	if len(left) != 0 {
		t.Errorf("containers left after close: %v", left)
	}
	st, err := store.Open(filepath.Join(dataDir, "state.db"), DefaultTeamSlug, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if rec, err := st.Sandboxes.PooledSandboxes(); err != nil || len(rec) != 0 {
		t.Errorf("records after close: %v %v", rec, err)
	}
}

// After a crash, the pool's records are forgotten and their containers
// removed like any container no sandbox claims.
func TestPoolAfterCrash(t *testing.T) {
	dataDir := t.TempDir()
	st, err := store.Open(filepath.Join(dataDir, "state.db"), DefaultTeamSlug, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := st.Catalog.RegisterBuild(store.RegisterRequest{Name: "app", CPUCount: 2, MemoryMB: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Sandboxes.AddPooled(store.Pooled{ID: "ipooled", TemplateID: reg.Template.ID, BuildID: reg.Build.ID, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	eng := newFakeEngine(t)
	eng.sandboxes["ipooled"] = func() error { return nil }
	ts := startPoolServer(t, eng, sandboxes.PoolConfig{PerBuild: 2, Max: 8, Idle: time.Hour}, nil, serverOptions{dataDir: dataDir})
	eng.mu.Lock()
	kept, left := slices.Clone(eng.keptOrphans), len(eng.sandboxes)
	eng.mu.Unlock()
	if len(kept) != 0 || left != 0 {
		t.Errorf("kept %v, engine has %d containers; want none", kept, left)
	}
	if rec := recordedPool(t, ts); len(rec) != 0 {
		t.Errorf("records after the restart: %v", rec)
	}
}

// forFreshAndPooled runs a test of sandboxes twice: with the pool off, and
// with it on, where every sandbox the test creates through
// createPossiblyPooled comes from the pool.
func forFreshAndPooled(t *testing.T, test func(t *testing.T, pool sandboxes.PoolConfig)) {
	t.Run("fresh", func(t *testing.T) { test(t, sandboxes.PoolConfig{}) })
	t.Run("pooled", func(t *testing.T) { test(t, sandboxes.PoolConfig{PerBuild: 2, Max: 8, Idle: time.Hour}) })
}

// createPossiblyPooled creates a sandbox of the template; with the pool on
// it waits for a pooled container of the template's build (after a first
// create, thrown away, that marks the build used) and checks that the
// sandbox is that container.
func (ts *testServer) createPossiblyPooled(template string) e2b.Sandbox {
	t := ts.t
	t.Helper()
	if !ts.Server.cfg.Pool.On() {
		return ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: template})
	}
	_, b, err := ts.Server.store.Catalog.Resolve(template)
	if err != nil {
		t.Fatal(err)
	}
	if !ts.Server.sandboxes.Pool().Recent[b.ID] {
		first := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: template})
		ts.call("DELETE", "/sandboxes/"+first.SandboxID, nil, http.StatusNoContent, nil)
	}
	var want string
	for deadline := time.Now().Add(2 * time.Minute); want == ""; time.Sleep(10 * time.Millisecond) {
		if ids := ts.pooledIDs()[b.ID]; len(ids) > 0 {
			want = ids[0]
		} else if time.Now().After(deadline) {
			t.Fatalf("no pooled container of %s after 2 minutes", template)
		}
	}
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: template})
	if sb.SandboxID != want {
		t.Fatalf("sandbox %s of %s is not the pooled %s", sb.SandboxID, template, want)
	}
	return sb
}
