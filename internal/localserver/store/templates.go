package store

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// Reasons recorded on builds that did not run to the end.
const (
	ReasonSuperseded = "superseded by a newer one"
)

// RegisterRequest is what POST /v3/templates asks for, already defaulted.
type RegisterRequest struct {
	Name     string
	Tags     []string
	CPUCount int32
	MemoryMB int32
}

// Registered is the outcome of RegisterBuild.
type Registered struct {
	Template Template
	Build    Build
}

func buildKey(templateID, buildID string) []byte {
	return []byte(templateID + "\x00" + buildID)
}

// RegisterBuild creates a waiting build under the template req.Name names,
// creating the template when the team has none by that name, and assigns the
// build its tags. Waiting builds of the template sharing a tag are failed as
// superseded.
func (s *Store) RegisterBuild(req RegisterRequest) (Registered, error) {
	name, err := s.parseBuildName(req.Name)
	if err != nil {
		return Registered{}, err
	}
	var tags []string
	if name.Tag != "" {
		tags = append(tags, name.Tag)
	}
	for _, raw := range req.Tags {
		tag, err := e2bapi.NormalizeTag(raw)
		if err != nil {
			return Registered{}, errorf(KindInvalid, "%v", err)
		}
		if !slices.Contains(tags, tag) {
			tags = append(tags, tag)
		}
	}
	if len(tags) == 0 {
		tags = []string{e2bapi.DefaultTag}
	}

	var out Registered
	err = s.db.Update(func(tx *bolt.Tx) error {
		now := s.now().UTC()
		tmpl, err := templateFor(tx, name.Alias, "", now)
		if err != nil {
			return err
		}
		build := Build{
			ID: uuid.NewString(), TemplateID: tmpl.ID, Status: e2bapi.BuildWaiting, Tags: tags,
			CPUCount: req.CPUCount, MemoryMB: req.MemoryMB, CreatedAt: now, UpdatedAt: now,
		}
		builds := tx.Bucket(bucketBuilds)
		err = forEachPrefix(builds, templateKeyPrefix(tmpl.ID), func(k, v []byte) error {
			var other Build
			if err := json.Unmarshal(v, &other); err != nil {
				return err
			}
			if other.Status != e2bapi.BuildWaiting || !sharesTag(other.Tags, tags) {
				return nil
			}
			failBuild(&other, &e2bapi.BuildStatusReason{Message: ReasonSuperseded}, now)
			return putJSON(builds, string(k), other)
		})
		if err != nil {
			return err
		}
		if err := putJSON(builds, string(buildKey(tmpl.ID, build.ID)), build); err != nil {
			return err
		}
		for _, tag := range tags {
			if err := assign(tx, tmpl.ID, tag, build.ID, now); err != nil {
				return err
			}
		}
		out = Registered{Template: tmpl, Build: build}
		return nil
	})
	return out, err
}

// parseBuildName parses the name a new build is registered under: the
// namespace, when given, must be the team's, and the tag must not be a
// build ID.
func (s *Store) parseBuildName(raw string) (e2bapi.Name, error) {
	name, err := e2bapi.ParseName(raw)
	if err != nil {
		return name, errorf(KindInvalid, "%v", err)
	}
	if name.Namespace != "" && name.Namespace != s.teamSlug {
		return name, errorf(KindInvalid, "namespace '%s' must match your team '%s'", name.Namespace, s.teamSlug)
	}
	if e2bapi.IsBuildID(name.Tag) {
		return name, errorf(KindInvalid, "template name %q names a build ID where a tag belongs", raw)
	}
	return name, nil
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
			return tmpl, errorf(KindNotFound, "Template '%s' has been deleted and cannot be rebuilt", existing.ID)
		case alias != "" && found:
			return tmpl, errorf(KindConflict, "Alias '%s' is already used", alias)
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

func sharesTag(a, b []string) bool {
	for _, t := range a {
		if slices.Contains(b, t) {
			return true
		}
	}
	return false
}

func failBuild(b *Build, reason *e2bapi.BuildStatusReason, now time.Time) {
	b.Status = e2bapi.BuildError
	b.Reason = reason
	b.UpdatedAt = now
	b.FinishedAt = &now
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

// lookupTemplate finds the live template an identifier names: its alias in
// the team's namespace, or its ID.
func (s *Store) lookupTemplate(tx *bolt.Tx, name e2bapi.Name) (Template, bool, error) {
	if name.Namespace != "" && name.Namespace != s.teamSlug {
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

// lookupRef parses ref (an ID or name, tag allowed) and finds its template.
func (s *Store) lookupRef(tx *bolt.Tx, ref string) (Template, e2bapi.Name, error) {
	name, err := e2bapi.ParseName(ref)
	if err != nil {
		return Template{}, name, errorf(KindInvalid, "%v", err)
	}
	t, found, err := s.lookupTemplate(tx, name)
	if err != nil {
		return Template{}, name, err
	}
	if !found {
		return Template{}, name, errorf(KindNotFound, "template '%s' not found", name.Identifier())
	}
	return t, name, nil
}

func getBuild(tx *bolt.Tx, templateID, buildID string) (Build, bool, error) {
	var b Build
	found, err := getJSON(tx.Bucket(bucketBuilds), string(buildKey(templateID, buildID)), &b)
	return b, found, err
}

// resolve finds the build ref names: "name:<buildID>" pins a build; otherwise
// the newest assignment of the tag ("default" when absent) whose build is
// ready, so that a running or failed rebuild never takes a tag away from the
// last good build.
func (s *Store) resolve(tx *bolt.Tx, ref string) (Template, Build, error) {
	t, name, err := s.lookupRef(tx, ref)
	if err != nil {
		return Template{}, Build{}, err
	}
	if e2bapi.IsBuildID(name.Tag) {
		b, found, err := getBuild(tx, t.ID, name.Tag)
		if err != nil {
			return Template{}, Build{}, err
		}
		if !found {
			return Template{}, Build{}, errorf(KindNotFound, "build '%s' of template '%s' not found", name.Tag, name.Identifier())
		}
		if b.Status != e2bapi.BuildReady {
			return Template{}, Build{}, errorf(KindNotFound, "build '%s' of template '%s' is %s, not ready", b.ID, name.Identifier(), b.Status)
		}
		return t, b, nil
	}
	tag := name.Tag
	if tag == "" {
		tag = e2bapi.DefaultTag
	}
	b, assigned, err := newestReady(tx, t.ID, tag)
	if err != nil {
		return Template{}, Build{}, err
	}
	if b == nil {
		if assigned {
			return Template{}, Build{}, errorf(KindNotFound, "template '%s' has no ready build tagged '%s'", name.Identifier(), tag)
		}
		return Template{}, Build{}, errorf(KindNotFound, "tag '%s' of template '%s' not found", tag, name.Identifier())
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
		if found && b.Status == e2bapi.BuildReady {
			return &b, true, nil
		}
	}
	return nil, len(assignments) > 0, nil
}

// Resolve finds the ready build a reference names (template ID or name,
// optionally ":tag" or ":<buildID>").
func (s *Store) Resolve(ref string) (Template, Build, error) {
	var t Template
	var b Build
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		t, b, err = s.resolve(tx, ref)
		return err
	})
	return t, b, err
}

// LookupTemplate finds the live template an ID or name (without tag) names.
func (s *Store) LookupTemplate(ref string) (Template, error) {
	var t Template
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		var name e2bapi.Name
		t, name, err = s.lookupRef(tx, ref)
		if err == nil && name.Tag != "" {
			return errorf(KindInvalid, "template reference %q must not contain a tag", ref)
		}
		return err
	})
	return t, err
}

// TemplateByID returns the live template with exactly this ID.
func (s *Store) TemplateByID(id string) (Template, error) {
	var t Template
	err := s.db.View(func(tx *bolt.Tx) error {
		found, err := getJSON(tx.Bucket(bucketTemplates), id, &t)
		if err != nil {
			return err
		}
		if !found || t.Deleted {
			return errorf(KindNotFound, "template '%s' not found", id)
		}
		return nil
	})
	return t, err
}

// Templates lists the live templates, oldest first.
func (s *Store) Templates() ([]Template, error) {
	var out []Template
	err := s.db.View(func(tx *bolt.Tx) error {
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

// Builds lists the builds of a template, newest first.
func (s *Store) Builds(templateID string) ([]Build, error) {
	var out []Build
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = templateBuilds(tx, templateID)
		return err
	})
	return out, err
}

func templateBuilds(tx *bolt.Tx, templateID string) ([]Build, error) {
	var out []Build
	err := forEachPrefix(tx.Bucket(bucketBuilds), templateKeyPrefix(templateID), func(_, v []byte) error {
		var b Build
		if err := json.Unmarshal(v, &b); err != nil {
			return err
		}
		out = append(out, b)
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, err
}

// Build returns one build of a template; a missing pair is KindNotFound.
func (s *Store) Build(templateID, buildID string) (Build, error) {
	var b Build
	err := s.db.View(func(tx *bolt.Tx) error {
		var found bool
		var err error
		b, found, err = getBuild(tx, templateID, buildID)
		if err == nil && !found {
			return errorf(KindNotFound, "Build '%s' not found", buildID)
		}
		return err
	})
	return b, err
}

// StartBuild moves a waiting build to building and records its request
// (which must carry no credentials). It returns the IDs of the template's
// other building builds that share a tag: the caller cancels them.
func (s *Store) StartBuild(templateID, buildID string, req e2bapi.TemplateBuildStartV2) (Build, []string, error) {
	var b Build
	var superseded []string
	err := s.db.Update(func(tx *bolt.Tx) error {
		var found bool
		var err error
		b, found, err = getBuild(tx, templateID, buildID)
		if err != nil {
			return err
		}
		if !found {
			return errorf(KindNotFound, "build '%s' of template '%s' not found", buildID, templateID)
		}
		var t Template
		if _, err := getJSON(tx.Bucket(bucketTemplates), templateID, &t); err != nil {
			return err
		}
		if t.Deleted {
			return errorf(KindNotFound, "template '%s' has been deleted", templateID)
		}
		if b.Status != e2bapi.BuildWaiting {
			return errorf(KindInvalid, "build is not in waiting state")
		}
		others, err := templateBuilds(tx, templateID)
		if err != nil {
			return err
		}
		for _, o := range others {
			if o.ID != b.ID && o.Status == e2bapi.BuildBuilding && sharesTag(o.Tags, b.Tags) {
				superseded = append(superseded, o.ID)
			}
		}
		now := s.now().UTC()
		b.Status = e2bapi.BuildBuilding
		b.UpdatedAt = now
		b.StepCount = len(req.Steps)
		req.FromImageRegistry = nil
		b.Request = &req
		return putJSON(tx.Bucket(bucketBuilds), string(buildKey(templateID, buildID)), b)
	})
	return b, superseded, err
}

// FinishBuild records the end of a building build: ready with result when
// reason is nil, else error with reason, to which the warn and error log
// entries of the failed step are added. A build that is no longer building
// is left as it is (false).
func (s *Store) FinishBuild(templateID, buildID string, result *BuildResult, reason *e2bapi.BuildStatusReason) (bool, error) {
	updated := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, found, err := getBuild(tx, templateID, buildID)
		if err != nil || !found || b.Status != e2bapi.BuildBuilding {
			return err
		}
		now := s.now().UTC()
		if reason == nil {
			b.Status = e2bapi.BuildReady
			b.Result = result
			b.UpdatedAt = now
			b.FinishedAt = &now
		} else {
			if reason.Step != "" {
				entries, err := logEntries(tx, buildID, 0, -1, e2bapi.LogWarn)
				if err != nil {
					return err
				}
				for _, e := range entries {
					if e.Step == reason.Step {
						reason.LogEntries = append(reason.LogEntries, e)
					}
				}
			}
			failBuild(&b, reason, now)
		}
		updated = true
		return putJSON(tx.Bucket(bucketBuilds), string(buildKey(templateID, buildID)), b)
	})
	return updated, err
}

// FailBuilding marks every building build as error with message: at start-up
// no build of this process can be running yet.
func (s *Store) FailBuilding(message string) (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		builds := tx.Bucket(bucketBuilds)
		now := s.now().UTC()
		var failed []Build
		err := builds.ForEach(func(_, v []byte) error {
			var b Build
			if err := json.Unmarshal(v, &b); err != nil {
				return err
			}
			if b.Status == e2bapi.BuildBuilding {
				failBuild(&b, &e2bapi.BuildStatusReason{Message: message}, now)
				failed = append(failed, b)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, b := range failed {
			if err := putJSON(builds, string(buildKey(b.TemplateID, b.ID)), b); err != nil {
				return err
			}
		}
		n = len(failed)
		return nil
	})
	return n, err
}

// AssignTags points tags at the build target names ("name:tag" or
// "name:<buildID>", tag "default" when absent) and returns that build's ID.
func (s *Store) AssignTags(target string, tags []string) (string, []string, error) {
	normalized, err := normalizeTags(tags)
	if err != nil {
		return "", nil, err
	}
	var buildID string
	err = s.db.Update(func(tx *bolt.Tx) error {
		t, b, err := s.resolve(tx, target)
		if err != nil {
			return err
		}
		now := s.now().UTC()
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
		return nil, errorf(KindInvalid, "at least one tag is required")
	}
	var out []string
	for _, raw := range tags {
		tag, err := e2bapi.NormalizeTag(raw)
		if err != nil {
			return nil, errorf(KindInvalid, "%v", err)
		}
		if !slices.Contains(out, tag) {
			out = append(out, tag)
		}
	}
	return out, nil
}

// DeleteTags removes every assignment of tags from the template name names
// (no tag allowed in name; "default" cannot be deleted).
func (s *Store) DeleteTags(ref string, tags []string) error {
	normalized, err := normalizeTags(tags)
	if err != nil {
		return err
	}
	if slices.Contains(normalized, e2bapi.DefaultTag) {
		return errorf(KindInvalid, "the '%s' tag cannot be deleted", e2bapi.DefaultTag)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		t, name, err := s.lookupRef(tx, ref)
		if err != nil {
			return err
		}
		if name.Tag != "" || bytes.ContainsRune([]byte(ref), ':') {
			return errorf(KindInvalid, "name '%s' must not contain a tag", ref)
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
			if len(keys) == 0 {
				return errorf(KindNotFound, "tag '%s' of template '%s' not found", tag, name.Identifier())
			}
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
// whatever the status of its build, as E2B lists them (design/e2b-api.md §4):
// a tag a build in progress or a failed one took is listed at that build,
// though it resolves to the newest ready one (resolve).
func (s *Store) Tags(templateID string) ([]e2bapi.TemplateTag, error) {
	var out []e2bapi.TemplateTag
	err := s.db.View(func(tx *bolt.Tx) error {
		// Keys are template, tag, sequence: a tag's rows are adjacent, newest last.
		return forEachPrefix(tx.Bucket(bucketTags), templateKeyPrefix(templateID), func(_, v []byte) error {
			var a Assignment
			if err := json.Unmarshal(v, &a); err != nil {
				return err
			}
			row := e2bapi.TemplateTag{Tag: a.Tag, BuildID: a.BuildID, CreatedAt: a.AssignedAt}
			if n := len(out); n > 0 && out[n-1].Tag == a.Tag {
				out[n-1] = row
			} else {
				out = append(out, row)
			}
			return nil
		})
	})
	return out, err
}

// SetPublic sets the public flag of the template ref names.
func (s *Store) SetPublic(ref string, public bool) (Template, error) {
	var t Template
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		t, _, err = s.lookupRef(tx, ref)
		if err != nil {
			return err
		}
		t.Public = public
		t.UpdatedAt = s.now().UTC()
		return putJSON(tx.Bucket(bucketTemplates), t.ID, t)
	})
	return t, err
}

// DeleteTemplate soft-deletes the template ref names unless a sandbox uses
// it: its alias is freed, its ID stays reserved. It returns the template's
// builds so that their images can be removed.
func (s *Store) DeleteTemplate(ref string) (Template, []Build, error) {
	var t Template
	var builds []Build
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		t, _, err = s.lookupRef(tx, ref)
		if err != nil {
			return err
		}
		inUse := 0
		err = tx.Bucket(bucketSandboxes).ForEach(func(_, v []byte) error {
			var sb Sandbox
			if err := json.Unmarshal(v, &sb); err != nil {
				return err
			}
			if sb.TemplateID == t.ID {
				inUse++
			}
			return nil
		})
		if err != nil {
			return err
		}
		if inUse > 0 {
			return errorf(KindInvalid, "cannot delete template '%s': %d running or paused sandboxes use it", t.ID, inUse)
		}
		if err := tx.Bucket(bucketAliases).Delete([]byte(t.Alias)); err != nil {
			return err
		}
		t.Deleted = true
		t.UpdatedAt = s.now().UTC()
		if builds, err = templateBuilds(tx, t.ID); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bucketTemplates), t.ID, t)
	})
	return t, builds, err
}
