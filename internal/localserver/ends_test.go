//go:build linux

package localserver

import (
	"net/http"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

// TestSandboxEndsReachTheRecords: a sandbox whose container exits is
// forgotten (404, not "running"); a paused one whose container exits stays
// paused (its resume boots it again) until its container is removed.
func TestSandboxEndsReachTheRecords(t *testing.T) {
	eng := newFakeEngine(t)
	ts := startServer(t, eng)
	ts.build("app")
	running := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app"})
	paused := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app"})
	ts.call("POST", "/sandboxes/"+paused.SandboxID+"/pause", nil, http.StatusNoContent, nil)
	// WatchSandboxEnds hands one end at a time: once a later end is taken,
	// the earlier ones have reached the records.
	report := func(ends ...engine.SandboxEnd) {
		for _, end := range append(ends, engine.SandboxEnd{SandboxID: "isync"}) {
			eng.ends <- end
		}
	}

	report(engine.SandboxEnd{SandboxID: running.SandboxID, ExitCode: "137"}, engine.SandboxEnd{SandboxID: paused.SandboxID, ExitCode: "0"})
	ts.expectError("GET", "/sandboxes/"+running.SandboxID, nil, http.StatusNotFound, "")
	if stopped := <-eng.stopped; stopped != running.SandboxID {
		t.Errorf("the engine stopped %s, want the ended sandbox %s", stopped, running.SandboxID)
	}
	var detail e2b.SandboxDetail
	ts.call("GET", "/sandboxes/"+paused.SandboxID, nil, http.StatusOK, &detail)
	if detail.State != "paused" {
		t.Errorf("a paused sandbox whose container exited is %q, want paused", detail.State)
	}

	report(engine.SandboxEnd{SandboxID: paused.SandboxID, Removed: true})
	ts.expectError("GET", "/sandboxes/"+paused.SandboxID, nil, http.StatusNotFound, "")
}
