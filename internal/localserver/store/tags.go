package store

import (
	"bytes"
	"encoding/json"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// Assignment points a tag of a template at a build; the newest ready one wins.
type Assignment struct {
	TemplateID string    `json:"templateID"`
	Tag        string    `json:"tag"`
	BuildID    string    `json:"buildID"`
	AssignedAt time.Time `json:"assignedAt"`
}

func assign(tx *bolt.Tx, templateID, tag, buildID string, now time.Time) error {
	tagsBucket := tx.Bucket(bucketTags)
	seq, err := tagsBucket.NextSequence()
	if err != nil {
		return err
	}
	key := append(tagKeyPrefix(templateID, tag), u64(seq)...)
	return putJSON(tagsBucket, string(key), Assignment{TemplateID: templateID, Tag: tag, BuildID: buildID, AssignedAt: now})
}

// resolve finds the build ref names in team's namespace: "name:<buildID>" pins a build; otherwise
// the newest assignment of the tag ("default" when absent) whose build is
// ready, so that a running or failed rebuild never takes a tag away from the
// last good build.
func resolve(tx *bolt.Tx, team, ref string) (Template, Build, error) {
	t, name, err := lookupRef(tx, team, ref)
	if err != nil {
		return Template{}, Build{}, err
	}
	if e2b.IsBuildID(name.Tag) {
		b, found, err := getBuild(tx, t.ID, name.Tag)
		if err != nil {
			return Template{}, Build{}, err
		}
		if !found {
			return Template{}, Build{}, failure.New(failure.NotFound, "build '%s' of template '%s' not found", name.Tag, name.Identifier())
		}
		if b.Status != e2b.BuildReady {
			return Template{}, Build{}, failure.New(failure.NotFound, "build '%s' of template '%s' is %s, not ready", b.ID, name.Identifier(), b.Status)
		}
		return t, b, nil
	}
	tag := name.Tag
	if tag == "" {
		tag = e2b.DefaultTag
	}
	b, assigned, err := newestReady(tx, t.ID, tag)
	if err != nil {
		return Template{}, Build{}, err
	}
	if b == nil {
		if assigned {
			return Template{}, Build{}, failure.New(failure.NotFound, "template '%s' has no ready build tagged '%s'", name.Identifier(), tag)
		}
		return Template{}, Build{}, failure.New(failure.NotFound, "tag '%s' of template '%s' not found", tag, name.Identifier())
	}
	return t, *b, nil
}

// newestReady returns the build of the newest assignment of tag whose build
// is ready (nil when none is), and whether the tag has any assignment.
func newestReady(tx *bolt.Tx, templateID, tag string) (*Build, bool, error) {
	var assignments []Assignment
	err := forEachPrefix(tx.Bucket(bucketTags), tagKeyPrefix(templateID, tag), func(_, v []byte) error {
		var a Assignment
		if err := json.Unmarshal(v, &a); err != nil {
			return err
		}
		assignments = append(assignments, a)
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	for i := len(assignments) - 1; i >= 0; i-- {
		b, found, err := getBuild(tx, templateID, assignments[i].BuildID)
		if err != nil {
			return nil, true, err
		}
		if found && b.Status == e2b.BuildReady {
			return &b, true, nil
		}
	}
	return nil, len(assignments) > 0, nil
}

// Resolve finds the ready build a reference names (template ID or name,
// optionally ":tag" or ":<buildID>").
func (c *Catalog) Resolve(ref string) (Template, Build, error) {
	var t Template
	var b Build
	err := c.db.View(func(tx *bolt.Tx) error {
		var err error
		t, b, err = resolve(tx, c.teamSlug, ref)
		return err
	})
	return t, b, err
}

// AssignTags points tags at the build target names ("name:tag" or
// "name:<buildID>", tag "default" when absent) and returns that build's ID.
func (c *Catalog) AssignTags(target string, tags []string) (string, []string, error) {
	normalized, err := normalizeTags(tags)
	if err != nil {
		return "", nil, err
	}
	var buildID string
	err = c.db.Update(func(tx *bolt.Tx) error {
		t, b, err := resolve(tx, c.teamSlug, target)
		if err != nil {
			return err
		}
		now := c.now().UTC()
		for _, tag := range normalized {
			if err := assign(tx, t.ID, tag, b.ID, now); err != nil {
				return err
			}
		}
		buildID = b.ID
		return nil
	})
	return buildID, normalized, err
}

func normalizeTags(tags []string) ([]string, error) {
	if len(tags) == 0 {
		return nil, failure.New(failure.Invalid, "at least one tag is required")
	}
	var out []string
	for _, raw := range tags {
		tag, err := e2b.NormalizeTag(raw)
		if err != nil {
			return nil, failure.New(failure.Invalid, "%v", err)
		}
		if !slices.Contains(out, tag) {
			out = append(out, tag)
		}
	}
	return out, nil
}

// DeleteTags removes every assignment of tags from the template name names
// (no tag allowed in name; "default" cannot be deleted).
func (c *Catalog) DeleteTags(ref string, tags []string) error {
	normalized, err := normalizeTags(tags)
	if err != nil {
		return err
	}
	if slices.Contains(normalized, e2b.DefaultTag) {
		return failure.New(failure.Invalid, "the '%s' tag cannot be deleted", e2b.DefaultTag)
	}
	return c.db.Update(func(tx *bolt.Tx) error {
		t, name, err := lookupRef(tx, c.teamSlug, ref)
		if err != nil {
			return err
		}
		if name.Tag != "" || bytes.ContainsRune([]byte(ref), ':') {
			return failure.New(failure.Invalid, "name '%s' must not contain a tag", ref)
		}
		tagsBucket := tx.Bucket(bucketTags)
		for _, tag := range normalized {
			var keys [][]byte
			err := forEachPrefix(tagsBucket, tagKeyPrefix(t.ID, tag), func(k, _ []byte) error {
				keys = append(keys, bytes.Clone(k))
				return nil
			})
			if err != nil {
				return err
			}
			// A tag the template lacks deletes nothing and is no error, as on E2B.
			for _, k := range keys {
				if err := tagsBucket.Delete(k); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Tags lists the tags of a template, sorted, each with its newest assignment
// whatever the status of its build, as E2B lists them (design/e2b-api.md "Names, aliases, tags"):
// a tag a build in progress or a failed one took is listed at that build,
// though it resolves to the newest ready one (resolve).
func (c *Catalog) Tags(templateID string) ([]Assignment, error) {
	var out []Assignment
	err := c.db.View(func(tx *bolt.Tx) error {
		// Keys are template, tag, sequence: a tag's rows are adjacent, newest last.
		return forEachPrefix(tx.Bucket(bucketTags), templateKeyPrefix(templateID), func(_, v []byte) error {
			var a Assignment
			if err := json.Unmarshal(v, &a); err != nil {
				return err
			}
			if n := len(out); n > 0 && out[n-1].Tag == a.Tag {
				out[n-1] = a
			} else {
				out = append(out, a)
			}
			return nil
		})
	})
	return out, err
}
