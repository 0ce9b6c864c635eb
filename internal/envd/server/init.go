//go:build linux

package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
)

// initRequest is the body of POST /init. The orchestrator's other fields
// (timestamp, caBundle, volumeMounts, hyperloopIP, lifecycleID) are accepted
// and ignored: this envd never changes the clock, the CA store, /etc/hosts or
// mounts.
type initRequest struct {
	EnvVars        *map[string]string `json:"envVars"`
	AccessToken    *string            `json:"accessToken"`
	DefaultUser    *string            `json:"defaultUser"`
	DefaultWorkdir *string            `json:"defaultWorkdir"`
}

// The answers of envd 0.6.13 to an /init that may not change the sandbox,
// sent as plain text (net/http names them text/plain).
const (
	initTokenMissing  = "access token reset not authorized"
	initTokenMismatch = "access token validation failed"
)

// handleInit is envd 0.6.13's /init outside Firecracker (no MMDS): the
// X-Access-Token header is not read; once a token is set, the body must
// carry that same token, so nothing inside the sandbox can replace it and
// the token is never rotated.
func (s *Server) handleInit(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Envd-Version", envd.Version)
	var req initRequest
	if r.ContentLength != 0 {
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxMessageBytes)).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid /init body: %v", err))
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.accessToken != "" {
		refusal := ""
		switch {
		case req.AccessToken == nil || *req.AccessToken == "":
			refusal = initTokenMissing
		case !tokenMatches(s.accessToken, *req.AccessToken):
			refusal = initTokenMismatch
		}
		if refusal != "" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(refusal))
			return
		}
	}
	if req.EnvVars != nil {
		s.envVars = maps.Clone(*req.EnvVars)
	}
	if req.AccessToken != nil && *req.AccessToken != "" {
		s.accessToken = *req.AccessToken
	}
	if req.DefaultUser != nil && *req.DefaultUser != "" {
		s.defaultUser = *req.DefaultUser
	}
	if req.DefaultWorkdir != nil && *req.DefaultWorkdir != "" {
		s.defaultWorkdir = *req.DefaultWorkdir
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}
