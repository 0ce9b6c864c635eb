package localserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// Snapshots (design/e2b-api.md "Snapshots"): a snapshot is a build, ready at once,
// whose image is the sandbox's file system committed.

// handleCreateSnapshot serves POST /sandboxes/{sandboxID}/snapshots: 201
// SnapshotInfo. The sandbox keeps running.
func (s *Server) handleCreateSnapshot(w http.ResponseWriter, r *http.Request) error {
	id, req, err := sandboxRequest[e2b.SandboxSnapshotRequest](w, r, false)
	if err != nil {
		return err
	}
	// A pause or resume during the commit would be undone by it.
	sb, unlock, err := s.sandboxes.Lock(id)
	if err != nil {
		return err
	}
	defer unlock()
	if sb.Paused() {
		// E2B snapshots running sandboxes only.
		return failure.New(failure.NotFound, "sandbox '%s' is paused: connect to it to resume it before a snapshot", id)
	}
	src, err := s.store.Build(sb.TemplateID, sb.BuildID)
	if err == nil && src.Result == nil {
		err = errors.New("it has no image")
	}
	if err != nil {
		return failure.OwnFailure(fmt.Errorf("the build of sandbox %s: %w", id, err))
	}
	name := ""
	if req.Name != nil {
		name = *req.Name
	}
	snap, err := s.store.RegisterSnapshot(store.SnapshotRequest{Name: name, SandboxID: id, CPUCount: src.CPUCount, MemoryMB: src.MemoryMB})
	if err != nil {
		return err
	}
	// Not cancelled with the request: the record must learn what became of
	// the commit.
	ctx := context.WithoutCancel(r.Context())
	ref, err := s.engine.CommitSandbox(ctx, engine.SnapshotSpec{SandboxID: id, TemplateID: snap.Template.ID, BuildID: snap.Build.ID, Image: src.Result.Image})
	if err != nil {
		if _, ferr := s.store.FinishBuild(snap.Template.ID, snap.Build.ID, nil, &store.BuildReason{Message: err.Error()}); ferr != nil {
			s.log.Error("record a failed snapshot", "build", snap.Build.ID, "err", ferr)
		}
		return failure.OwnFailure(err)
	}
	result := *src.Result
	result.Image = ref
	finished, err := s.store.FinishBuild(snap.Template.ID, snap.Build.ID, &result, nil)
	if err == nil && !finished {
		err = errors.New("the build is no longer building")
	}
	if err != nil {
		// No record owns the image.
		if rerr := s.engine.RemoveImage(ctx, ref); rerr != nil {
			s.log.Error("remove the image of a snapshot that could not be recorded", "image", ref, "err", rerr)
		}
		return failure.OwnFailure(fmt.Errorf("record snapshot %s: %w", snap.Build.ID, err))
	}
	writeJSON(w, http.StatusCreated, s.snapshotInfo(snap))
	return nil
}

// handleListSnapshots serves GET /snapshots: the snapshot templates,
// newest first, filtered by sandboxID and by name ("name" matches any tag,
// "name:tag" that tag), paged.
func (s *Server) handleListSnapshots(w http.ResponseWriter, r *http.Request) error {
	limit, err := pageLimit(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	templateID, tag := "", ""
	if raw := q.Get("name"); raw != "" {
		name, err := e2b.ParseName(raw)
		if err != nil {
			return failure.New(failure.Invalid, "Invalid name: %v", err)
		}
		if name.Namespace != "" && name.Namespace != s.store.TeamSlug() {
			return failure.New(failure.Invalid, "namespace '%s' must match your team '%s'", name.Namespace, s.store.TeamSlug())
		}
		tag = name.Tag
		if tag == "" && strings.Contains(raw, ":") {
			tag = e2b.DefaultTag
		}
		t, err := s.store.LookupTemplate(name.Identifier())
		if failure.KindOf(err) == failure.NotFound {
			writeJSON(w, http.StatusOK, []e2b.SnapshotInfo{})
			return nil
		}
		if err != nil {
			return err
		}
		templateID = t.ID
	}
	snaps, err := s.store.Snapshots(q.Get("sandboxID"), templateID, tag)
	if err != nil {
		return failure.OwnFailure(err)
	}
	out := make([]e2b.SnapshotInfo, 0, len(snaps))
	for _, snap := range snaps {
		out = append(out, s.snapshotInfo(snap))
	}
	page, next := paginate(out, limit, q.Get("nextToken"), func(i e2b.SnapshotInfo) string { return i.SnapshotID })
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// snapshotInfo names a snapshot as E2B does: "<namespace>/<alias>:<tag>"
// with its full name, or "<templateID>:<tag>" and no names for a template
// of no name.
func (s *Server) snapshotInfo(snap store.Snapshot) e2b.SnapshotInfo {
	if snap.Template.Alias == "" {
		return e2b.SnapshotInfo{SnapshotID: snap.Template.ID + ":" + snap.Tag, Names: []string{}}
	}
	name := s.store.Name(snap.Template)
	return e2b.SnapshotInfo{SnapshotID: name + ":" + snap.Tag, Names: []string{name}}
}
