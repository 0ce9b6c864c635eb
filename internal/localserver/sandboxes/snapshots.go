package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// Snapshots (design/e2b-api.md "Snapshots"): a snapshot is a build, ready at once,
// whose image is the sandbox's file system committed.

// Snapshot commits the running sandbox's file system as a snapshot named
// name (none when empty). The sandbox keeps running.
func (s *Manager) Snapshot(ctx context.Context, id, name string) (e2b.SnapshotInfo, error) {
	// A pause or resume during the commit would be undone by it.
	sb, unlock, err := s.Lock(id)
	if err != nil {
		return e2b.SnapshotInfo{}, err
	}
	defer unlock()
	if sb.Paused() {
		// E2B snapshots running sandboxes only.
		return e2b.SnapshotInfo{}, failure.New(failure.NotFound, "sandbox '%s' is paused: connect to it to resume it before a snapshot", id)
	}
	src, err := s.catalog.Build(sb.TemplateID, sb.BuildID)
	if err == nil && src.Result == nil {
		err = errors.New("it has no image")
	}
	if err != nil {
		return e2b.SnapshotInfo{}, failure.OwnFailure(fmt.Errorf("the build of sandbox %s: %w", id, err))
	}
	snap, err := s.catalog.RegisterSnapshot(store.SnapshotRequest{Name: name, SandboxID: id, CPUCount: src.CPUCount, MemoryMB: src.MemoryMB})
	if err != nil {
		return e2b.SnapshotInfo{}, err
	}
	// Not cancelled with the request: the record must learn what became of
	// the commit.
	ctx = context.WithoutCancel(ctx)
	ref, err := s.engine.CommitSandbox(ctx, engine.SnapshotSpec{SandboxID: id, TemplateID: snap.Template.ID, BuildID: snap.Build.ID, Image: src.Result.Image})
	if err != nil {
		if _, ferr := s.catalog.FinishBuild(snap.Template.ID, snap.Build.ID, nil, &store.BuildReason{Message: err.Error()}); ferr != nil {
			s.log.Error("record a failed snapshot", "build", snap.Build.ID, "err", ferr)
		}
		return e2b.SnapshotInfo{}, failure.OwnFailure(err)
	}
	result := *src.Result
	result.Image = ref
	finished, err := s.catalog.FinishBuild(snap.Template.ID, snap.Build.ID, &result, nil)
	if err == nil && !finished {
		err = errors.New("the build is no longer building")
	}
	if err != nil {
		// No record owns the image.
		if rerr := s.engine.RemoveImage(ctx, ref); rerr != nil {
			s.log.Error("remove the image of a snapshot that could not be recorded", "image", ref, "err", rerr)
		}
		return e2b.SnapshotInfo{}, failure.OwnFailure(fmt.Errorf("record snapshot %s: %w", snap.Build.ID, err))
	}
	return s.snapshotInfo(snap), nil
}

// Snapshots lists the snapshot templates, newest first, of the sandbox
// sandboxID (any when empty) and of the name rawName ("name" matches any
// tag, "name:tag" that tag; any when empty).
func (s *Manager) Snapshots(sandboxID, rawName string) ([]e2b.SnapshotInfo, error) {
	templateID, tag := "", ""
	if rawName != "" {
		name, err := e2b.ParseName(rawName)
		if err != nil {
			return nil, failure.New(failure.Invalid, "Invalid name: %v", err)
		}
		if name.Namespace != "" && name.Namespace != s.catalog.TeamSlug() {
			return nil, failure.New(failure.Invalid, "namespace '%s' must match your team '%s'", name.Namespace, s.catalog.TeamSlug())
		}
		tag = name.Tag
		if tag == "" && strings.Contains(rawName, ":") {
			tag = e2b.DefaultTag
		}
		t, err := s.catalog.LookupTemplate(name.Identifier())
		if failure.KindOf(err) == failure.NotFound {
			return []e2b.SnapshotInfo{}, nil
		}
		if err != nil {
			return nil, err
		}
		templateID = t.ID
	}
	snaps, err := s.catalog.Snapshots(sandboxID, templateID, tag)
	if err != nil {
		return nil, failure.OwnFailure(err)
	}
	out := make([]e2b.SnapshotInfo, 0, len(snaps))
	for _, snap := range snaps {
		out = append(out, s.snapshotInfo(snap))
	}
	return out, nil
}

// snapshotInfo names a snapshot as E2B does: "<namespace>/<alias>:<tag>"
// with its full name, or "<templateID>:<tag>" and no names for a template
// of no name.
func (s *Manager) snapshotInfo(snap store.Snapshot) e2b.SnapshotInfo {
	if snap.Template.Alias == "" {
		return e2b.SnapshotInfo{SnapshotID: snap.Template.ID + ":" + snap.Tag, Names: []string{}}
	}
	name := s.catalog.Name(snap.Template)
	return e2b.SnapshotInfo{SnapshotID: name + ":" + snap.Tag, Names: []string{name}}
}
