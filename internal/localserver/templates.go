package localserver

import (
	"net/http"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// Defaults E2B applies to absent resources (design/e2b-api.md "POST /v3/templates").
const (
	defaultCPUCount = 2
	defaultMemoryMB = 1024
)

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) error {
	var req e2b.TemplateBuildRequestV3
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	name := req.Name
	if name == "" {
		name = req.Alias
	}
	if name == "" {
		return failure.New(failure.Invalid, "name is required")
	}
	cpu, mem := int32(defaultCPUCount), int32(defaultMemoryMB)
	if req.CPUCount != nil {
		cpu = *req.CPUCount
	}
	if req.MemoryMB != nil {
		mem = *req.MemoryMB
	}
	if cpu < 1 || (cpu != 1 && cpu%2 != 0) || cpu > s.cfg.MaxCPUCount {
		return failure.New(failure.Invalid, "cpuCount %d is invalid: it must be 1 or an even number of at most %d", cpu, s.cfg.MaxCPUCount)
	}
	if mem < 128 || mem%2 != 0 || mem > s.cfg.MaxMemoryMB {
		return failure.New(failure.Invalid, "memoryMB %d is invalid: it must be an even number from 128 to %d", mem, s.cfg.MaxMemoryMB)
	}
	reg, err := s.store.RegisterBuild(store.RegisterRequest{Name: name, Tags: req.Tags, CPUCount: cpu, MemoryMB: mem})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, e2b.TemplateRequestResponseV3{
		TemplateID: reg.Template.ID,
		BuildID:    reg.Build.ID,
		Public:     reg.Template.Public,
		Names:      []string{s.store.Name(reg.Template)},
		Tags:       reg.Build.Tags,
		Aliases:    []string{reg.Template.Alias},
	})
	return nil
}

// listItem is a template as the list endpoints show it: buildID is the
// newest ready build (the newest build when none is ready).
func (s *Server) listItem(t store.Template) (e2b.Template, error) {
	builds, err := s.store.Builds(t.ID)
	if err != nil {
		return e2b.Template{}, err
	}
	item := e2b.Template{
		TemplateID: t.ID, Public: t.Public,
		Aliases: []string{t.Alias}, Names: []string{s.store.Name(t)},
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

func (s *Server) listItems() ([]e2b.Template, error) {
	templates, err := s.store.Templates()
	if err != nil {
		return nil, err
	}
	out := []e2b.Template{}
	for _, t := range templates {
		if t.SnapshotOf != "" {
			continue // snapshots are listed by GET /snapshots, as on E2B
		}
		item, err := s.listItem(t)
		if err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	return out, nil
}

func (s *Server) handleListTemplates(w http.ResponseWriter, r *http.Request) error {
	items, err := s.listItems()
	if err != nil {
		return failure.OwnFailure(err)
	}
	writeJSON(w, http.StatusOK, items)
	return nil
}

func (s *Server) handleListTemplatesV2(w http.ResponseWriter, r *http.Request) error {
	limit, err := pageLimit(r)
	if err != nil {
		return err
	}
	items, err := s.listItems()
	if err != nil {
		return failure.OwnFailure(err)
	}
	page, next := paginate(items, limit, r.URL.Query().Get("nextToken"), func(t e2b.Template) string { return t.TemplateID })
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) handleGetTemplate(w http.ResponseWriter, r *http.Request) error {
	limit, err := pageLimit(r)
	if err != nil {
		return err
	}
	t, err := s.store.TemplateByID(r.PathValue("templateID"))
	if err != nil {
		return err
	}
	if t.SnapshotOf != "" {
		return failure.New(failure.NotFound, "template '%s' not found: it is a snapshot", t.ID)
	}
	builds, err := s.store.Builds(t.ID)
	if err != nil {
		return failure.OwnFailure(err)
	}
	page, next := paginate(builds, limit, r.URL.Query().Get("nextToken"), func(b store.Build) string { return b.ID })
	out := e2b.TemplateWithBuilds{
		TemplateID: t.ID, Public: t.Public,
		Aliases: []string{t.Alias}, Names: []string{s.store.Name(t)},
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		LastSpawnedAt: t.LastSpawnedAt, SpawnCount: t.SpawnCount,
		Builds: []e2b.TemplateBuild{},
	}
	for _, b := range page {
		tb := e2b.TemplateBuild{
			BuildID: b.ID, Status: b.Status, CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt,
			FinishedAt: b.FinishedAt, CPUCount: b.CPUCount, MemoryMB: b.MemoryMB,
		}
		if b.Result != nil {
			tb.EnvdVersion = b.Result.EnvdVersion
		}
		out.Builds = append(out.Builds, tb)
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleDeleteTemplate(w http.ResponseWriter, r *http.Request) error {
	t, builds, err := s.store.DeleteTemplate(r.PathValue("templateID"))
	if err != nil {
		return err
	}
	// Before the images: a pooled container holds its image.
	s.sandboxes.DropTemplatePool(r.Context(), t.ID)
	// The template is deleted either way; an image left behind only costs disk.
	for _, b := range builds {
		if b.Result == nil || b.Result.Image == "" {
			continue
		}
		if err := s.engine.RemoveImage(r.Context(), b.Result.Image); err != nil {
			s.log.Warn("remove image of deleted template", "template", t.ID, "image", b.Result.Image, "err", err)
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handlePatchTemplate(w http.ResponseWriter, r *http.Request) error {
	var req e2b.TemplateUpdateRequest
	if err := decodeBody(w, r, &req, true); err != nil {
		return err
	}
	ref := r.PathValue("templateID")
	var t store.Template
	var err error
	if req.Public == nil {
		t, err = s.store.LookupTemplate(ref)
	} else {
		t, err = s.store.SetPublic(ref, *req.Public)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e2b.TemplateUpdateResponse{Names: []string{s.store.Name(t)}})
	return nil
}

func (s *Server) handleAlias(w http.ResponseWriter, ref string) error {
	name, err := e2b.ParseName(ref)
	if err != nil {
		return failure.New(failure.Invalid, "%v", err)
	}
	var t store.Template
	if name.Tag != "" {
		t, _, err = s.store.Resolve(ref)
	} else {
		t, err = s.store.LookupTemplate(ref)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e2b.TemplateAliasResponse{TemplateID: t.ID, Public: t.Public})
	return nil
}

func (s *Server) handleAssignTags(w http.ResponseWriter, r *http.Request) error {
	var req e2b.AssignTemplateTagsRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	buildID, tags, err := s.store.AssignTags(req.Target, req.Tags)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, e2b.AssignedTemplateTags{BuildID: buildID, Tags: tags})
	return nil
}

func (s *Server) handleDeleteTags(w http.ResponseWriter, r *http.Request) error {
	var req e2b.DeleteTemplateTagsRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if err := s.store.DeleteTags(req.Name, req.Tags); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleListTags(w http.ResponseWriter, ref string) error {
	t, err := s.store.LookupTemplate(ref)
	if err != nil {
		return err
	}
	tags, err := s.store.Tags(t.ID)
	if err != nil {
		return failure.OwnFailure(err)
	}
	writeJSON(w, http.StatusOK, wireTags(tags))
	return nil
}
