package store

import (
	"encoding/json"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// Reasons recorded on builds that did not run to the end.
const (
	ReasonSuperseded = "superseded by a newer one"
)

// Build is one build of a template.
type Build struct {
	ID         string       `json:"id"`
	TemplateID string       `json:"templateID"`
	Status     string       `json:"status"`
	Reason     *BuildReason `json:"reason,omitempty"`
	// Tags are the tags the build was registered with; builds sharing one
	// supersede each other.
	Tags       []string      `json:"tags"`
	CPUCount   int32         `json:"cpuCount"`
	MemoryMB   int32         `json:"memoryMB"`
	StepCount  int           `json:"stepCount"`
	CreatedAt  time.Time     `json:"createdAt"`
	UpdatedAt  time.Time     `json:"updatedAt"`
	FinishedAt *time.Time    `json:"finishedAt,omitempty"`
	Request    *BuildRequest `json:"request,omitempty"`
	Result     *BuildResult  `json:"result,omitempty"`
}

// The records below are the store's own, so that a change of E2B's wire
// types or of the engine's is never a change of what data directories hold.
// Their JSON keys are those the records had when the store kept the wire
// types themselves: data directories written then read unchanged.

// BuildRequest is the start request a build ran. It has no field for
// registry credentials, so none can be stored.
type BuildRequest struct {
	FromImage    string      `json:"fromImage,omitempty"`
	FromTemplate string      `json:"fromTemplate,omitempty"`
	Force        bool        `json:"force"`
	Steps        []BuildStep `json:"steps"`
	StartCmd     string      `json:"startCmd,omitempty"`
	ReadyCmd     string      `json:"readyCmd,omitempty"`
}

// BuildStep is one step of a BuildRequest.
type BuildStep struct {
	Type      string   `json:"type"`
	Args      []string `json:"args"`
	FilesHash string   `json:"filesHash,omitempty"`
	Force     bool     `json:"force"`
}

// BuildReason says why a build ended in error: Step is the failed step
// ("base", "1".."N", "finalize"; empty when none is to blame) and
// LogEntries its warn and error lines.
type BuildReason struct {
	Message    string     `json:"message"`
	Step       string     `json:"step,omitempty"`
	LogEntries []LogEntry `json:"logEntries,omitempty"`
}

// BuildResult is the state a finished build leaves for its sandboxes.
type BuildResult struct {
	// Image is the committed Docker image of the build.
	Image    string            `json:"Image"`
	User     string            `json:"User"`
	Workdir  string            `json:"Workdir"`
	Env      map[string]string `json:"Env"`
	StartCmd string            `json:"StartCmd"`
	ReadyCmd string            `json:"ReadyCmd"`
	// EnvdVersion is the envd protocol version sandboxes of this build speak.
	EnvdVersion string `json:"EnvdVersion"`
}

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
func (c *Catalog) RegisterBuild(req RegisterRequest) (Registered, error) {
	name, err := parseBuildName(c.teamSlug, req.Name)
	if err != nil {
		return Registered{}, err
	}
	var tags []string
	if name.Tag != "" {
		tags = append(tags, name.Tag)
	}
	for _, raw := range req.Tags {
		tag, err := e2b.NormalizeTag(raw)
		if err != nil {
			return Registered{}, failure.New(failure.Invalid, "%v", err)
		}
		if !slices.Contains(tags, tag) {
			tags = append(tags, tag)
		}
	}
	if len(tags) == 0 {
		tags = []string{e2b.DefaultTag}
	}

	var out Registered
	err = c.db.Update(func(tx *bolt.Tx) error {
		now := c.now().UTC()
		tmpl, err := templateFor(tx, name.Alias, "", now)
		if err != nil {
			return err
		}
		build := Build{
			ID: uuid.NewString(), TemplateID: tmpl.ID, Status: e2b.BuildWaiting, Tags: tags,
			CPUCount: req.CPUCount, MemoryMB: req.MemoryMB, CreatedAt: now, UpdatedAt: now,
		}
		builds := tx.Bucket(bucketBuilds)
		err = forEachPrefix(builds, templateKeyPrefix(tmpl.ID), func(k, v []byte) error {
			var other Build
			if err := json.Unmarshal(v, &other); err != nil {
				return err
			}
			if other.Status != e2b.BuildWaiting || !sharesTag(other.Tags, tags) {
				return nil
			}
			failBuild(&other, &BuildReason{Message: ReasonSuperseded}, now)
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
// namespace, when given, must be team's, and the tag must not be a build
// ID.
func parseBuildName(team, raw string) (e2b.Name, error) {
	name, err := e2b.ParseName(raw)
	if err != nil {
		return name, failure.New(failure.Invalid, "%v", err)
	}
	if name.Namespace != "" && name.Namespace != team {
		return name, failure.New(failure.Invalid, "namespace '%s' must match your team '%s'", name.Namespace, team)
	}
	if e2b.IsBuildID(name.Tag) {
		return name, failure.New(failure.Invalid, "template name %q names a build ID where a tag belongs", raw)
	}
	return name, nil
}

func sharesTag(a, b []string) bool {
	for _, t := range a {
		if slices.Contains(b, t) {
			return true
		}
	}
	return false
}

func failBuild(b *Build, reason *BuildReason, now time.Time) {
	b.Status = e2b.BuildError
	b.Reason = reason
	b.UpdatedAt = now
	b.FinishedAt = &now
}

func getBuild(tx *bolt.Tx, templateID, buildID string) (Build, bool, error) {
	var b Build
	found, err := getJSON(tx.Bucket(bucketBuilds), string(buildKey(templateID, buildID)), &b)
	return b, found, err
}

// Builds lists the builds of a template, newest first.
func (c *Catalog) Builds(templateID string) ([]Build, error) {
	var out []Build
	err := c.db.View(func(tx *bolt.Tx) error {
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

// Build returns one build of a live template; a missing pair, or a build of a deleted
// template, is failure.NotFound, as on E2B, which finds builds among its active templates.
func (c *Catalog) Build(templateID, buildID string) (Build, error) {
	var b Build
	err := c.db.View(func(tx *bolt.Tx) error {
		var t Template
		if _, err := getJSON(tx.Bucket(bucketTemplates), templateID, &t); err != nil {
			return err
		}
		var found bool
		var err error
		b, found, err = getBuild(tx, templateID, buildID)
		if err == nil && (!found || t.Deleted) {
			return failure.New(failure.NotFound, "Build '%s' not found", buildID)
		}
		return err
	})
	return b, err
}

// StartBuild moves a waiting build to building and records its request. It
// returns the IDs of the template's other building builds that share a tag:
// the caller cancels them.
func (c *Catalog) StartBuild(templateID, buildID string, req BuildRequest) (Build, []string, error) {
	var b Build
	var superseded []string
	err := c.db.Update(func(tx *bolt.Tx) error {
		var found bool
		var err error
		b, found, err = getBuild(tx, templateID, buildID)
		if err != nil {
			return err
		}
		if !found {
			return failure.New(failure.NotFound, "build '%s' of template '%s' not found", buildID, templateID)
		}
		var t Template
		if _, err := getJSON(tx.Bucket(bucketTemplates), templateID, &t); err != nil {
			return err
		}
		if t.Deleted {
			return failure.New(failure.NotFound, "template '%s' has been deleted", templateID)
		}
		if b.Status != e2b.BuildWaiting {
			return failure.New(failure.Invalid, "build is not in waiting state")
		}
		others, err := templateBuilds(tx, templateID)
		if err != nil {
			return err
		}
		for _, o := range others {
			if o.ID != b.ID && o.Status == e2b.BuildBuilding && sharesTag(o.Tags, b.Tags) {
				superseded = append(superseded, o.ID)
			}
		}
		now := c.now().UTC()
		b.Status = e2b.BuildBuilding
		b.UpdatedAt = now
		b.StepCount = len(req.Steps)
		b.Request = &req
		return putJSON(tx.Bucket(bucketBuilds), string(buildKey(templateID, buildID)), b)
	})
	return b, superseded, err
}

// FinishBuild records the end of a building build: ready with result when
// reason is nil, else error with reason, to which the warn and error log
// entries of the failed step are added. A build that is no longer building
// is left as it is (false).
func (c *Catalog) FinishBuild(templateID, buildID string, result *BuildResult, reason *BuildReason) (bool, error) {
	updated := false
	err := c.db.Update(func(tx *bolt.Tx) error {
		b, found, err := getBuild(tx, templateID, buildID)
		if err != nil || !found || b.Status != e2b.BuildBuilding {
			return err
		}
		now := c.now().UTC()
		if reason == nil {
			b.Status = e2b.BuildReady
			b.Result = result
			b.UpdatedAt = now
			b.FinishedAt = &now
		} else {
			if reason.Step != "" {
				entries, err := logEntries(tx, buildID, 0, -1, e2b.LogWarn)
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
func (c *Catalog) FailBuilding(message string) (int, error) {
	n := 0
	err := c.db.Update(func(tx *bolt.Tx) error {
		builds := tx.Bucket(bucketBuilds)
		now := c.now().UTC()
		var failed []Build
		err := builds.ForEach(func(_, v []byte) error {
			var b Build
			if err := json.Unmarshal(v, &b); err != nil {
				return err
			}
			if b.Status == e2b.BuildBuilding {
				failBuild(&b, &BuildReason{Message: message}, now)
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
