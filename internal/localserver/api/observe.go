package api

import (
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// The sandbox metrics and log endpoints.

// defaultSandboxLogsLimit is the limit of a sandbox log request without one.
const defaultSandboxLogsLimit = 1000

// handleSandboxMetrics serves GET /sandboxes/{sandboxID}/metrics: start
// and end are Unix seconds, both optional.
func (s *sandboxHandlers) handleSandboxMetrics(w http.ResponseWriter, r *http.Request) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	start, err := queryInt(r, "start", 0)
	if err != nil {
		return err
	}
	end, err := queryInt(r, "end", math.MaxInt64)
	if err != nil {
		return err
	}
	out, err := s.observer.Metrics(r.Context(), id, start, end)
	return answer(w, http.StatusOK, out, err)
}

// handleSandboxesMetrics serves GET /sandboxes/metrics?sandbox_ids=a,b.
func (s *sandboxHandlers) handleSandboxesMetrics(w http.ResponseWriter, r *http.Request) error {
	var ids []string
	for _, raw := range r.URL.Query()["sandbox_ids"] {
		ids = append(ids, strings.Split(raw, ",")...)
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == "" })
	out, err := s.observer.LatestMetrics(r.Context(), ids)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
	return nil
}

// handleSandboxLogs serves the deprecated GET /sandboxes/{sandboxID}/logs:
// the entries from start (Unix ms) on, oldest first, at most limit (1000).
func (s *sandboxHandlers) handleSandboxLogs(w http.ResponseWriter, r *http.Request) error {
	start, err := queryInt(r, "start", -1)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", defaultSandboxLogsLimit)
	if err != nil {
		return err
	}
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	out, err := s.observer.Logs(r.Context(), id, start, limit)
	return answer(w, http.StatusOK, out, err)
}

// handleSandboxLogsV2 serves GET /v2/sandboxes/{sandboxID}/logs: a page
// by time as the build logs', but backward by default, as on E2B; level
// the least level; search a case-sensitive substring of the message; at
// most limit (1000).
func (s *sandboxHandlers) handleSandboxLogsV2(w http.ResponseWriter, r *http.Request) error {
	cursor, err := queryInt(r, "cursor", -1)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", defaultSandboxLogsLimit)
	if err != nil {
		return err
	}
	direction, err := queryDirection(r, "backward")
	if err != nil {
		return err
	}
	level, err := queryLevel(r)
	if err != nil {
		return err
	}
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	q := store.LogQuery{Cursor: cursor, Backward: direction == "backward", Limit: int(min(limit, math.MaxInt32)), MinLevel: level}
	logs, err := s.observer.LogPage(r.Context(), id, q, r.URL.Query().Get("search"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e2b.SandboxLogsV2Response{Logs: logs})
	return nil
}
