package store

import (
	"encoding/json"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// Template is a template: the stable ID behind a name and its builds.
type Template struct {
	ID            string     `json:"id"`
	Alias         string     `json:"alias"`
	Public        bool       `json:"public"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	LastSpawnedAt *time.Time `json:"lastSpawnedAt,omitempty"`
	SpawnCount    int64      `json:"spawnCount"`
	// Deleted templates stay so their ID can never be rebuilt.
	Deleted bool `json:"deleted,omitempty"`
	// SnapshotOf is the sandbox a snapshot template was made from (E2B's
	// source "snapshot_template"); empty for templates made by builds.
	SnapshotOf string `json:"snapshotOf,omitempty"`
}

// templateFor returns, updated at now, the template alias names, creating it
// when the team has none by that name; snapshotOf is the sandbox a created
// template is a snapshot of (empty for a built one). An empty alias always
// creates a template of no name.
func templateFor(tx *bolt.Tx, alias, snapshotOf string, now time.Time) (Template, error) {
	templates := tx.Bucket(bucketTemplates)
	aliases := tx.Bucket(bucketAliases)
	var tmpl Template
	if id := aliases.Get([]byte(alias)); alias != "" && id != nil {
		if _, err := getJSON(templates, string(id), &tmpl); err != nil {
			return tmpl, err
		}
	} else {
		var existing Template
		found, err := getJSON(templates, alias, &existing)
		if err != nil {
			return tmpl, err
		}
		switch {
		case alias != "" && found && existing.Deleted:
			return tmpl, failure.New(failure.NotFound, "Template '%s' has been deleted and cannot be rebuilt", existing.ID)
		case alias != "" && found:
			return tmpl, failure.New(failure.Conflict, "Alias '%s' is already used", alias)
		}
		tmpl = Template{ID: newTemplateID(templates, aliases), Alias: alias, SnapshotOf: snapshotOf, CreatedAt: now}
		if alias != "" {
			if err := aliases.Put([]byte(alias), []byte(tmpl.ID)); err != nil {
				return tmpl, err
			}
		}
	}
	tmpl.UpdatedAt = now
	return tmpl, putJSON(templates, tmpl.ID, tmpl)
}

func newTemplateID(templates, aliases *bolt.Bucket) string {
	for {
		id := RandomID(20)
		if templates.Get([]byte(id)) == nil && aliases.Get([]byte(id)) == nil {
			return id
		}
	}
}

// lookupTemplate finds the live template an identifier names: its alias in
// team's namespace, or its ID.
func lookupTemplate(tx *bolt.Tx, team string, name e2b.Name) (Template, bool, error) {
	if name.Namespace != "" && name.Namespace != team {
		return Template{}, false, nil
	}
	templates := tx.Bucket(bucketTemplates)
	id := name.Alias
	if aliased := tx.Bucket(bucketAliases).Get([]byte(name.Alias)); aliased != nil {
		id = string(aliased)
	}
	var t Template
	found, err := getJSON(templates, id, &t)
	if err != nil || !found || t.Deleted {
		return Template{}, false, err
	}
	return t, true, nil
}

// lookupRef parses ref (an ID or name, tag allowed) and finds its template
// in team's namespace.
func lookupRef(tx *bolt.Tx, team, ref string) (Template, e2b.Name, error) {
	name, err := e2b.ParseName(ref)
	if err != nil {
		return Template{}, name, failure.New(failure.Invalid, "%v", err)
	}
	t, found, err := lookupTemplate(tx, team, name)
	if err != nil {
		return Template{}, name, err
	}
	if !found {
		return Template{}, name, failure.New(failure.NotFound, "template '%s' not found", name.Identifier())
	}
	return t, name, nil
}

// LookupTemplate finds the live template an ID or name (without tag) names.
func (c *Catalog) LookupTemplate(ref string) (Template, error) {
	var t Template
	err := c.db.View(func(tx *bolt.Tx) error {
		var err error
		var name e2b.Name
		t, name, err = lookupRef(tx, c.teamSlug, ref)
		if err == nil && name.Tag != "" {
			return failure.New(failure.Invalid, "template reference %q must not contain a tag", ref)
		}
		return err
	})
	return t, err
}

// TemplateByID returns the live template with exactly this ID.
func (c *Catalog) TemplateByID(id string) (Template, error) {
	var t Template
	err := c.db.View(func(tx *bolt.Tx) error {
		var err error
		t, err = liveTemplateByID(tx, id)
		return err
	})
	return t, err
}

// liveTemplateByID returns the live template with exactly this ID, in a
// transaction of any kind's change that needs one (failure.NotFound when
// there is none).
func liveTemplateByID(tx *bolt.Tx, id string) (Template, error) {
	var t Template
	found, err := getJSON(tx.Bucket(bucketTemplates), id, &t)
	if err == nil && (!found || t.Deleted) {
		return t, failure.New(failure.NotFound, "template '%s' not found", id)
	}
	return t, err
}

// countSpawn counts a sandbox started at at on the live template with this
// ID, in the transaction that records the sandbox.
func countSpawn(tx *bolt.Tx, templateID string, at time.Time) error {
	t, err := liveTemplateByID(tx, templateID)
	if err != nil {
		return err
	}
	t.LastSpawnedAt = &at
	t.SpawnCount++
	return putJSON(tx.Bucket(bucketTemplates), t.ID, t)
}

// Templates lists the live templates, oldest first.
func (c *Catalog) Templates() ([]Template, error) {
	var out []Template
	err := c.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTemplates).ForEach(func(_, v []byte) error {
			var t Template
			if err := json.Unmarshal(v, &t); err != nil {
				return err
			}
			if !t.Deleted {
				out = append(out, t)
			}
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, err
}

// SetPublic sets the public flag of the template ref names.
func (c *Catalog) SetPublic(ref string, public bool) (Template, error) {
	var t Template
	err := c.db.Update(func(tx *bolt.Tx) error {
		var err error
		t, _, err = lookupRef(tx, c.teamSlug, ref)
		if err != nil {
			return err
		}
		t.Public = public
		t.UpdatedAt = c.now().UTC()
		return putJSON(tx.Bucket(bucketTemplates), t.ID, t)
	})
	return t, err
}

// DeleteTemplate soft-deletes the template ref names unless a sandbox uses
// it: its alias is freed, its ID stays reserved. It returns the template's
// builds so that their images can be removed.
func (c *Catalog) DeleteTemplate(ref string) (Template, []Build, error) {
	var t Template
	var builds []Build
	err := c.db.Update(func(tx *bolt.Tx) error {
		var err error
		t, _, err = lookupRef(tx, c.teamSlug, ref)
		if err != nil {
			return err
		}
		inUse, err := sandboxesOf(tx, t.ID)
		if err != nil {
			return err
		}
		if inUse > 0 {
			return failure.New(failure.Invalid, "cannot delete template '%s': %d running or paused sandboxes use it", t.ID, inUse)
		}
		if err := tx.Bucket(bucketAliases).Delete([]byte(t.Alias)); err != nil {
			return err
		}
		t.Deleted = true
		t.UpdatedAt = c.now().UTC()
		if builds, err = templateBuilds(tx, t.ID); err != nil {
			return err
		}
		if err := deleteTemplatePool(tx, t.ID); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bucketTemplates), t.ID, t)
	})
	return t, builds, err
}
