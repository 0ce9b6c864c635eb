package store

import (
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
)

// A sandbox recorded as starting runs once SandboxStarted records its
// container, and only a starting one takes that.
func TestSandboxStarted(t *testing.T) {
	s := newStore(t)
	r := register(t, s, "app")
	now := time.Now().UTC()
	sb := Sandbox{ID: "isb", TemplateID: r.Template.ID, BuildID: r.Build.ID, State: StateStarting, StartedAt: now, EndAt: now.Add(time.Hour)}
	if err := s.Sandboxes.CreateSandbox(sb); err != nil {
		t.Fatal(err)
	}
	got, err := s.Sandboxes.SandboxStarted("isb", "c1", "0.6.13")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != StateRunning || got.ContainerID != "c1" || got.EnvdVersion != "0.6.13" || got.Starting() {
		t.Errorf("started = %+v", got)
	}
	if _, err := s.Sandboxes.SandboxStarted("isb", "c2", "0.6.13"); failure.KindOf(err) != failure.Conflict {
		t.Errorf("a second start = %v, want a conflict", err)
	}
	// One whose end passed while it started still runs (the reaper ends it).
	late := Sandbox{ID: "ilate", TemplateID: r.Template.ID, BuildID: r.Build.ID, State: StateStarting, StartedAt: now, EndAt: now.Add(-time.Second)}
	if err := s.Sandboxes.CreateSandbox(late); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Sandboxes.SandboxStarted("ilate", "c3", "0.6.13"); err != nil || got.State != StateRunning {
		t.Errorf("start of a sandbox past its end = %+v, %v; want it running", got, err)
	}
	if _, err := s.Sandboxes.SandboxStarted("inope", "c", "v"); failure.KindOf(err) != failure.NotFound {
		t.Errorf("start of an unknown sandbox = %v, want not found", err)
	}
}
