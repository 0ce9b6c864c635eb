package store

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// SnapshotRequest is a snapshot of a sandbox to register (POST
// /sandboxes/{sandboxID}/snapshots).
type SnapshotRequest struct {
	// Name is "[namespace/]alias[:tag]", or empty for a template of no name.
	Name      string
	SandboxID string
	CPUCount  int32
	MemoryMB  int32
}

// Snapshot is a snapshot template with the build and tag a listing shows.
type Snapshot struct {
	Template Template
	Build    Build
	Tag      string
}

// RegisterSnapshot creates a building build, tagged with the name's tag
// ("default" when it has none), of the template the name names: as on E2B
// an existing template of the team takes the build; otherwise a snapshot
// template of the sandbox is created, of no name when the name is empty.
// The caller commits the image and ends the build with FinishBuild.
func (c *Catalog) RegisterSnapshot(req SnapshotRequest) (Snapshot, error) {
	var name e2b.Name
	if req.Name != "" {
		var err error
		if name, err = parseBuildName(c.teamSlug, req.Name); err != nil {
			return Snapshot{}, err
		}
	}
	tag := name.Tag
	if tag == "" {
		tag = e2b.DefaultTag
	}
	var out Snapshot
	err := c.db.Update(func(tx *bolt.Tx) error {
		now := c.now().UTC()
		tmpl, err := templateFor(tx, name.Alias, req.SandboxID, now)
		if err != nil {
			return err
		}
		build := Build{
			ID: uuid.NewString(), TemplateID: tmpl.ID, Status: e2b.BuildBuilding, Tags: []string{tag},
			CPUCount: req.CPUCount, MemoryMB: req.MemoryMB, CreatedAt: now, UpdatedAt: now,
		}
		if err := putJSON(tx.Bucket(bucketBuilds), string(buildKey(tmpl.ID, build.ID)), build); err != nil {
			return err
		}
		out = Snapshot{Template: tmpl, Build: build, Tag: tag}
		return assign(tx, tmpl.ID, tag, build.ID, now)
	})
	return out, err
}

// Snapshots lists the live snapshot templates, newest first, each with the
// newest assignment of tag (any tag when empty) whose build is ready;
// templates without one are left out, as are those of other sandboxes when
// sandboxID is set and other templates when templateID is.
func (c *Catalog) Snapshots(sandboxID, templateID, tag string) ([]Snapshot, error) {
	var out []Snapshot
	err := c.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTemplates).ForEach(func(_, v []byte) error {
			var t Template
			if err := json.Unmarshal(v, &t); err != nil {
				return err
			}
			if t.Deleted || t.SnapshotOf == "" || (sandboxID != "" && t.SnapshotOf != sandboxID) || (templateID != "" && t.ID != templateID) {
				return nil
			}
			snap, found, err := newestReadySnapshot(tx, t, tag)
			if found {
				out = append(out, snap)
			}
			return err
		})
	})
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Template, out[j].Template
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.After(b.CreatedAt)
		}
		return a.ID > b.ID
	})
	return out, err
}

// newestReadySnapshot finds the newest assignment of t (of tag, when set)
// whose build is ready. Assignment keys end with the bucket's sequence, so
// the largest is the newest across tags.
func newestReadySnapshot(tx *bolt.Tx, t Template, tag string) (Snapshot, bool, error) {
	prefix := templateKeyPrefix(t.ID)
	if tag != "" {
		prefix = tagKeyPrefix(t.ID, tag)
	}
	var newest Snapshot
	var newestSeq []byte
	err := forEachPrefix(tx.Bucket(bucketTags), prefix, func(k, v []byte) error {
		seq := k[len(k)-8:]
		if newestSeq != nil && bytes.Compare(seq, newestSeq) < 0 {
			return nil
		}
		var a Assignment
		if err := json.Unmarshal(v, &a); err != nil {
			return err
		}
		b, found, err := getBuild(tx, t.ID, a.BuildID)
		if err == nil && found && b.Status == e2b.BuildReady {
			newest, newestSeq = Snapshot{Template: t, Build: b, Tag: a.Tag}, seq
		}
		return err
	})
	return newest, newestSeq != nil, err
}
