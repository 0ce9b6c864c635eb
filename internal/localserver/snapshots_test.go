//go:build linux

package localserver

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

func strp(s string) *string { return &s }

func (ts *testServer) snapshotIDs(query string) []string {
	ts.t.Helper()
	var list []e2b.SnapshotInfo
	ts.call("GET", "/snapshots"+query, nil, http.StatusOK, &list)
	ids := []string{}
	for _, s := range list {
		ids = append(ids, s.SnapshotID)
	}
	return ids
}

// A snapshot is a ready build of a snapshot template (new, or the team's
// template the name names), listed by GET /snapshots and not among the
// templates, that sandboxes start from and DELETE /templates removes.
func TestSandboxSnapshots(t *testing.T) {
	eng := newFakeEngine(t)
	ts := startServer(t, eng)
	app, _ := ts.build("app")
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app"})
	path := "/sandboxes/" + sb.SandboxID + "/snapshots"

	var unnamed, named, retagged, intoApp e2b.SnapshotInfo
	ts.call("POST", path, e2b.SandboxSnapshotRequest{}, http.StatusCreated, &unnamed)
	if !strings.HasSuffix(unnamed.SnapshotID, ":default") || len(unnamed.Names) != 0 {
		t.Errorf("unnamed snapshot = %+v, want <templateID>:default and no names", unnamed)
	}
	ts.call("POST", path, e2b.SandboxSnapshotRequest{Name: strp("snap:v1")}, http.StatusCreated, &named)
	if named.SnapshotID != "local/snap:v1" || !slices.Equal(named.Names, []string{"local/snap"}) {
		t.Errorf("named snapshot = %+v", named)
	}
	ts.call("POST", path, e2b.SandboxSnapshotRequest{Name: strp("local/snap")}, http.StatusCreated, &retagged)
	if retagged.SnapshotID != "local/snap:default" {
		t.Errorf("second snapshot of the name = %+v", retagged)
	}
	ts.call("POST", path, e2b.SandboxSnapshotRequest{Name: strp("app:snap")}, http.StatusCreated, &intoApp)
	if intoApp.SnapshotID != "local/app:snap" {
		t.Errorf("snapshot into the template app = %+v", intoApp)
	}

	if got := ts.snapshotIDs(""); !slices.Equal(got, []string{"local/snap:default", unnamed.SnapshotID}) {
		t.Errorf("GET /snapshots = %v, want the two snapshot templates, newest first", got)
	}
	if got := ts.snapshotIDs("?name=snap:v1"); !slices.Equal(got, []string{"local/snap:v1"}) {
		t.Errorf("GET /snapshots?name=snap:v1 = %v", got)
	}
	if got := ts.snapshotIDs("?sandboxID=iother&limit=5"); len(got) != 0 {
		t.Errorf("snapshots of another sandbox = %v, want none", got)
	}
	if got := ts.snapshotIDs("?name=nope"); len(got) != 0 {
		t.Errorf("snapshots named nope = %v, want none", got)
	}
	var page []e2b.SnapshotInfo
	if next := ts.call("GET", "/snapshots?limit=1", nil, http.StatusOK, &page).Get("X-Next-Token"); len(page) != 1 || next == "" {
		t.Errorf("first page of one = %v, next token %q", page, next)
	}

	var templates []e2b.Template
	ts.call("GET", "/templates", nil, http.StatusOK, &templates)
	if len(templates) != 1 || templates[0].TemplateID != app.TemplateID {
		t.Errorf("GET /templates = %+v, want only app: snapshots are not templates there", templates)
	}
	snapID, _, _ := strings.Cut(unnamed.SnapshotID, ":")
	ts.expectError("GET", "/templates/"+snapID, nil, http.StatusNotFound, "snapshot")

	from := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "snap:v1"})
	ts.call("DELETE", "/sandboxes/"+from.SandboxID, nil, http.StatusNoContent, nil)
	ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: unnamed.SnapshotID})

	ts.expectError("POST", path, e2b.SandboxSnapshotRequest{Name: strp("other/x")}, http.StatusBadRequest, "namespace 'other'")
	ts.expectError("POST", path, e2b.SandboxSnapshotRequest{Name: strp("bad name!")}, http.StatusBadRequest, "")
	ts.expectError("POST", "/sandboxes/inope/snapshots", e2b.SandboxSnapshotRequest{}, http.StatusNotFound, "not found")

	eng.mu.Lock()
	eng.snapshotErr = errors.New("disk full")
	eng.mu.Unlock()
	ts.expectError("POST", path, e2b.SandboxSnapshotRequest{Name: strp("broken")}, http.StatusInternalServerError, "disk full")
	if got := ts.snapshotIDs("?name=broken"); len(got) != 0 {
		t.Errorf("a failed snapshot is listed: %v", got)
	}

	ts.call("POST", "/sandboxes/"+sb.SandboxID+"/pause", nil, http.StatusNoContent, nil)
	ts.expectError("POST", path, e2b.SandboxSnapshotRequest{}, http.StatusNotFound, "is paused")

	ts.call("DELETE", "/templates/snap", nil, http.StatusNoContent, nil)
	eng.mu.Lock()
	removed := len(eng.removedImages)
	eng.mu.Unlock()
	if removed != 2 {
		t.Errorf("deleting snap removed %d images, want its two", removed)
	}
	if got := ts.snapshotIDs(""); !slices.Equal(got, []string{unnamed.SnapshotID}) {
		t.Errorf("snapshots after deleting snap = %v", got)
	}
	// The SDK's deleteSnapshot: DELETE /templates/{snapshotID}, tag and all,
	// once no sandbox of it is left.
	ts.expectError("DELETE", "/templates/"+unnamed.SnapshotID, nil, http.StatusBadRequest, "running or paused sandboxes use it")
	var list []e2b.ListedSandbox
	ts.call("GET", "/v2/sandboxes", nil, http.StatusOK, &list)
	for _, l := range list {
		if l.TemplateID == snapID {
			ts.call("DELETE", "/sandboxes/"+l.SandboxID, nil, http.StatusNoContent, nil)
		}
	}
	ts.call("DELETE", "/templates/"+unnamed.SnapshotID, nil, http.StatusNoContent, nil)
	if got := ts.snapshotIDs(""); len(got) != 0 {
		t.Errorf("snapshots after deleting all = %v", got)
	}
}
