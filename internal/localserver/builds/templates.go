package builds

import (
	"context"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// Defaults E2B applies to absent resources (design/e2b-api.md "POST /v3/templates").
const (
	defaultCPUCount = 2
	defaultMemoryMB = 1024
)

// Register registers a build of the template req names (made when new),
// waiting for its start.
func (s *Manager) Register(req e2b.TemplateBuildRequestV3) (e2b.TemplateRequestResponseV3, error) {
	name := req.Name
	if name == "" {
		name = req.Alias
	}
	if name == "" {
		return e2b.TemplateRequestResponseV3{}, failure.New(failure.Invalid, "name is required")
	}
	cpu, mem := int32(defaultCPUCount), int32(defaultMemoryMB)
	if req.CPUCount != nil {
		cpu = *req.CPUCount
	}
	if req.MemoryMB != nil {
		mem = *req.MemoryMB
	}
	if cpu < 1 || (cpu != 1 && cpu%2 != 0) || cpu > s.cfg.MaxCPUCount {
		return e2b.TemplateRequestResponseV3{}, failure.New(failure.Invalid, "cpuCount %d is invalid: it must be 1 or an even number of at most %d", cpu, s.cfg.MaxCPUCount)
	}
	if mem < 128 || mem%2 != 0 || mem > s.cfg.MaxMemoryMB {
		return e2b.TemplateRequestResponseV3{}, failure.New(failure.Invalid, "memoryMB %d is invalid: it must be an even number from 128 to %d", mem, s.cfg.MaxMemoryMB)
	}
	reg, err := s.catalog.RegisterBuild(store.RegisterRequest{Name: name, Tags: req.Tags, CPUCount: cpu, MemoryMB: mem})
	if err != nil {
		return e2b.TemplateRequestResponseV3{}, err
	}
	return e2b.TemplateRequestResponseV3{
		TemplateID: reg.Template.ID,
		BuildID:    reg.Build.ID,
		Public:     reg.Template.Public,
		Names:      []string{s.catalog.Name(reg.Template)},
		Tags:       reg.Build.Tags,
		Aliases:    []string{reg.Template.Alias},
	}, nil
}

// listItem is a template as the list endpoints show it: buildID is the
// newest ready build (the newest build when none is ready).
func (s *Manager) listItem(t store.Template) (e2b.Template, error) {
	builds, err := s.catalog.Builds(t.ID)
	if err != nil {
		return e2b.Template{}, err
	}
	item := e2b.Template{
		TemplateID: t.ID, Public: t.Public,
		Aliases: []string{t.Alias}, Names: []string{s.catalog.Name(t)},
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		LastSpawnedAt: t.LastSpawnedAt, SpawnCount: t.SpawnCount,
		BuildCount: int32(len(builds)), //nolint:gosec // the wire type is int32; a template has far fewer builds
	}
	if len(builds) == 0 {
		return item, nil
	}
	item.BuildStatus = builds[0].Status
	shown := builds[0]
	for _, b := range builds {
		if b.Status == e2b.BuildReady {
			shown = b
			break
		}
	}
	item.BuildID, item.CPUCount, item.MemoryMB = shown.ID, shown.CPUCount, shown.MemoryMB
	if shown.Result != nil {
		item.EnvdVersion = shown.Result.EnvdVersion
	}
	return item, nil
}

// Templates lists the templates, snapshots aside (GET /snapshots lists
// those, as on E2B).
func (s *Manager) Templates() ([]e2b.Template, error) {
	templates, err := s.catalog.Templates()
	if err != nil {
		return nil, failure.OwnFailure(err)
	}
	out := []e2b.Template{}
	for _, t := range templates {
		if t.SnapshotOf != "" {
			continue
		}
		item, err := s.listItem(t)
		if err != nil {
			return nil, failure.OwnFailure(err)
		}
		out = append(out, item)
	}
	return out, nil
}

// Template is the template of that ID with all its builds, newest first.
func (s *Manager) Template(id string) (e2b.TemplateWithBuilds, error) {
	t, err := s.catalog.TemplateByID(id)
	if err != nil {
		return e2b.TemplateWithBuilds{}, failure.MissingAs(err, failure.NotFound, "Template %s not found", id) // E2B's words here
	}
	if t.SnapshotOf != "" {
		return e2b.TemplateWithBuilds{}, failure.New(failure.NotFound, "template '%s' not found: it is a snapshot", t.ID)
	}
	builds, err := s.catalog.Builds(t.ID)
	if err != nil {
		return e2b.TemplateWithBuilds{}, failure.OwnFailure(err)
	}
	out := e2b.TemplateWithBuilds{
		TemplateID: t.ID, Public: t.Public,
		Aliases: []string{t.Alias}, Names: []string{s.catalog.Name(t)},
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		LastSpawnedAt: t.LastSpawnedAt, SpawnCount: t.SpawnCount,
		Builds: []e2b.TemplateBuild{},
	}
	for _, b := range builds {
		tb := e2b.TemplateBuild{
			BuildID: b.ID, Status: b.Status, CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt,
			FinishedAt: b.FinishedAt, CPUCount: b.CPUCount, MemoryMB: b.MemoryMB,
		}
		if b.Result != nil {
			tb.EnvdVersion = b.Result.EnvdVersion
		}
		out.Builds = append(out.Builds, tb)
	}
	return out, nil
}

// Delete deletes the template ref names and removes its builds' images.
func (s *Manager) Delete(ctx context.Context, ref string) error {
	t, builds, err := s.catalog.DeleteTemplate(ref)
	if err != nil {
		return err
	}
	if s.cfg.Deleting != nil {
		s.cfg.Deleting(ctx, t.ID)
	}
	// The template is deleted either way; an image left behind only costs disk.
	for _, b := range builds {
		if b.Result == nil || b.Result.Image == "" {
			continue
		}
		if err := s.engine.RemoveImage(ctx, b.Result.Image); err != nil {
			s.log.Warn("remove image of deleted template", "template", t.ID, "image", b.Result.Image, "err", err)
		}
	}
	return nil
}

// Update makes the template ref names public or not (unchanged when public
// is nil) and answers its names.
func (s *Manager) Update(ref string, public *bool) (e2b.TemplateUpdateResponse, error) {
	var t store.Template
	var err error
	if public == nil {
		t, err = s.catalog.LookupTemplate(ref)
	} else {
		t, err = s.catalog.SetPublic(ref, *public)
	}
	if err != nil {
		return e2b.TemplateUpdateResponse{}, err
	}
	return e2b.TemplateUpdateResponse{Names: []string{s.catalog.Name(t)}}, nil
}

// Alias is the template a name (with a tag: that tag's) refers to.
func (s *Manager) Alias(ref string) (e2b.TemplateAliasResponse, error) {
	name, err := e2b.ParseName(ref)
	if err != nil {
		return e2b.TemplateAliasResponse{}, failure.New(failure.Invalid, "%v", err)
	}
	var t store.Template
	if name.Tag != "" {
		t, _, err = s.catalog.Resolve(ref)
	} else {
		t, err = s.catalog.LookupTemplate(ref)
	}
	if err != nil {
		return e2b.TemplateAliasResponse{}, err
	}
	return e2b.TemplateAliasResponse{TemplateID: t.ID, Public: t.Public}, nil
}

// AssignTags moves tags to the build target names.
func (s *Manager) AssignTags(req e2b.AssignTemplateTagsRequest) (e2b.AssignedTemplateTags, error) {
	buildID, tags, err := s.catalog.AssignTags(req.Target, req.Tags)
	if err != nil {
		return e2b.AssignedTemplateTags{}, err
	}
	return e2b.AssignedTemplateTags{BuildID: buildID, Tags: tags}, nil
}

// DeleteTags removes tags of the template req names.
func (s *Manager) DeleteTags(req e2b.DeleteTemplateTagsRequest) error {
	return s.catalog.DeleteTags(req.Name, req.Tags)
}

// Tags lists the tags of the template ref names.
func (s *Manager) Tags(ref string) ([]e2b.TemplateTag, error) {
	t, err := s.catalog.LookupTemplate(ref)
	if err != nil {
		return nil, err
	}
	tags, err := s.catalog.Tags(t.ID)
	if err != nil {
		return nil, failure.OwnFailure(err)
	}
	return wireTags(tags), nil
}
