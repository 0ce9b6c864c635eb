package api

import (
	"net/http"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// The template and tag endpoints: each reads its request, calls the builds
// Manager once and writes its answer.

// templateHandlers serve the template, tag, upload and build endpoints.
type templateHandlers struct {
	builds Builds
	cfg    Config
}

func (s *templateHandlers) handleRegister(w http.ResponseWriter, r *http.Request) error {
	var req e2b.TemplateBuildRequestV3
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	reg, err := s.builds.Register(req)
	return answer(w, http.StatusAccepted, reg, err)
}

func (s *templateHandlers) handleListTemplates(w http.ResponseWriter, r *http.Request) error {
	items, err := s.builds.Templates()
	return answer(w, http.StatusOK, items, err)
}

func (s *templateHandlers) handleListTemplatesV2(w http.ResponseWriter, r *http.Request) error {
	limit, err := pageLimit(r)
	if err != nil {
		return err
	}
	items, err := s.builds.Templates()
	if err != nil {
		return err
	}
	page, next := paginate(items, limit, r.URL.Query().Get("nextToken"), func(t e2b.Template) string { return t.TemplateID })
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *templateHandlers) handleGetTemplate(w http.ResponseWriter, r *http.Request) error {
	limit, err := pageLimit(r)
	if err != nil {
		return err
	}
	out, err := s.builds.Template(r.PathValue("templateID"))
	if err != nil {
		return err
	}
	page, next := paginate(out.Builds, limit, r.URL.Query().Get("nextToken"), func(b e2b.TemplateBuild) string { return b.BuildID })
	out.Builds = page
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *templateHandlers) handleDeleteTemplate(w http.ResponseWriter, r *http.Request) error {
	if err := s.builds.Delete(r.Context(), r.PathValue("templateID")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *templateHandlers) handlePatchTemplate(w http.ResponseWriter, r *http.Request) error {
	var req e2b.TemplateUpdateRequest
	if err := decodeBody(w, r, &req, true); err != nil {
		return err
	}
	out, err := s.builds.Update(r.PathValue("templateID"), req.Public)
	return answer(w, http.StatusOK, out, err)
}

func (s *templateHandlers) handleAlias(w http.ResponseWriter, ref string) error {
	out, err := s.builds.Alias(ref)
	return answer(w, http.StatusOK, out, err)
}

func (s *templateHandlers) handleAssignTags(w http.ResponseWriter, r *http.Request) error {
	var req e2b.AssignTemplateTagsRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	out, err := s.builds.AssignTags(req)
	return answer(w, http.StatusCreated, out, err)
}

func (s *templateHandlers) handleDeleteTags(w http.ResponseWriter, r *http.Request) error {
	var req e2b.DeleteTemplateTagsRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if err := s.builds.DeleteTags(req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *templateHandlers) handleListTags(w http.ResponseWriter, ref string) error {
	tags, err := s.builds.Tags(ref)
	return answer(w, http.StatusOK, tags, err)
}
