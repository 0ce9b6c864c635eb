package api

import (
	"net/http"
	"strings"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
)

// UploadPath prefixes the upload URLs; the grant token follows it. It is
// outside the E2B API and needs no API key: the token is the credential.
const UploadPath = "/_local/uploads/"

// handleFileLink answers GET /templates/{id}/files/{hash} with whether the
// archive is stored and, always (as E2B does), a single-use upload URL.
func (s *templateHandlers) handleFileLink(w http.ResponseWriter, r *http.Request, templateID, hash string) error {
	present, token, err := s.builds.FileLink(templateID, hash)
	if err != nil {
		return err
	}
	base := s.cfg.PublicURL
	if base == "" {
		base = "http://" + r.Host
	}
	writeJSON(w, http.StatusCreated, e2b.TemplateBuildFileUpload{
		Present: present,
		URL:     strings.TrimSuffix(base, "/") + UploadPath + token,
	})
	return nil
}

// handleUpload receives an archive on its upload URL (builds.Manager.Upload).
func (s *templateHandlers) handleUpload(w http.ResponseWriter, r *http.Request, token string) error {
	if r.Method != http.MethodPut {
		return failure.New(failure.WrongMethod, "uploads use PUT")
	}
	// Archives may be large and slow: a deadline of their own, not the one
	// of API bodies.
	boundBody(w, r, s.cfg.UploadReadTimeout)
	if err := s.builds.Upload(token, r.ContentLength, r.Body); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}
