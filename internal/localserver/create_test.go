//go:build linux

package localserver

import (
	"net/http"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/sandboxes"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// A sandbox create is one forward flow: the sandbox is recorded with its
// final ID, its container gets the sandbox's end once (a fresh one at its
// start, a pooled one when handed out), and a sandbox still starting is in
// no list and is removed by a restart.
func TestSandboxCreateIsOneForwardFlow(t *testing.T) {
	forFreshAndPooled(t, func(t *testing.T, pool sandboxes.PoolConfig) {
		clock := newTestClock()
		eng := newFakeEngine(t)
		ts := startPoolServer(t, eng, pool, clock)
		ts.build("app")
		sb := ts.createPossiblyPooled("app")
		d := ts.detail(sb.SandboxID)

		eng.mu.Lock()
		end, sets := eng.deadlines[sb.SandboxID], eng.deadlineSets[sb.SandboxID]
		eng.mu.Unlock()
		if !end.Equal(d.EndAt) {
			t.Errorf("container ends at %v, the sandbox at %v", end, d.EndAt)
		}
		wantSets := 0 // a fresh container is started with its end
		if pool.On() {
			wantSets = 1 // a pooled one, started with the pool's end, takes it when handed out
		}
		if sets != wantSets {
			t.Errorf("the end went down %d times by SetSandboxDeadline, want %d", sets, wantSets)
		}
		rec, err := ts.Server.Store().Sandboxes.Sandbox(sb.SandboxID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != store.StateRunning || rec.ContainerID == "" {
			t.Errorf("record = %+v, want running with its container", rec)
		}
	})
}

// A sandbox recorded as starting is in no list: its create has not
// answered (TestStartAfterCrash: a restart forgets it).
func TestStartingSandboxIsNotListed(t *testing.T) {
	ts := startServer(t, newFakeEngine(t))
	reg, _ := ts.build("app")
	starting := store.Sandbox{
		ID: "istarting", TemplateID: reg.TemplateID, BuildID: reg.BuildID, State: store.StateStarting,
		StartedAt: time.Now(), EndAt: time.Now().Add(time.Hour),
	}
	if err := ts.Server.Store().Sandboxes.CreateSandbox(starting); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/sandboxes", "/v2/sandboxes"} {
		var listed []e2b.ListedSandbox
		ts.call("GET", path, nil, http.StatusOK, &listed)
		if len(listed) != 0 {
			t.Errorf("%s listed %+v, want no starting sandbox", path, listed)
		}
	}
}
