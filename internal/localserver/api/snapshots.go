package api

import (
	"net/http"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// The snapshot endpoints.

// handleCreateSnapshot serves POST /sandboxes/{sandboxID}/snapshots: 201
// SnapshotInfo. The sandbox keeps running.
func (s *sandboxHandlers) handleCreateSnapshot(w http.ResponseWriter, r *http.Request) error {
	id, req, err := sandboxRequest[e2b.SandboxSnapshotRequest](w, r, false)
	if err != nil {
		return err
	}
	name := ""
	if req.Name != nil {
		name = *req.Name
	}
	info, err := s.sandboxes.Snapshot(r.Context(), id, name)
	return answer(w, http.StatusCreated, info, err)
}

// handleListSnapshots serves GET /snapshots: filtered by sandboxID and by
// name, paged.
func (s *sandboxHandlers) handleListSnapshots(w http.ResponseWriter, r *http.Request) error {
	limit, err := pageLimit(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	out, err := s.sandboxes.Snapshots(q.Get("sandboxID"), q.Get("name"))
	if err != nil {
		return err
	}
	page, next := paginate(out, limit, q.Get("nextToken"), func(i e2b.SnapshotInfo) string { return i.SnapshotID })
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
