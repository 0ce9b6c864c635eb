package api

import (
	"net/http"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// The build endpoints: start, status and log.

// handleStartBuild serves POST /v2/templates/{templateID}/builds/{buildID}.
func (s *templateHandlers) handleStartBuild(w http.ResponseWriter, r *http.Request) error {
	templateID, buildID := r.PathValue("templateID"), r.PathValue("buildID")
	if err := s.builds.CheckBuild(templateID, buildID); err != nil {
		return err
	}
	var req e2b.TemplateBuildStartV2
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	// The build outlives the request: it runs under the Manager's context.
	if err := s.builds.Start(templateID, buildID, req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// buildLogsQuery reads what both build log endpoints take: where to start
// (the parameter named position, def when absent), limit (default 100)
// and the least level.
func buildLogsQuery(r *http.Request, position string, def int64) (start, limit int64, level string, err error) {
	if start, err = queryInt(r, position, def); err != nil {
		return 0, 0, "", err
	}
	if limit, err = queryInt(r, "limit", 100); err != nil {
		return 0, 0, "", err
	}
	if level, err = queryLevel(r); err != nil {
		return 0, 0, "", err
	}
	return start, limit, level, nil
}

func (s *templateHandlers) handleBuildStatus(w http.ResponseWriter, r *http.Request) error {
	offset, limit, level, err := buildLogsQuery(r, "logsOffset", 0)
	if err != nil {
		return err
	}
	info, err := s.builds.Status(r.PathValue("templateID"), r.PathValue("buildID"), int(offset), int(limit), level)
	return answer(w, http.StatusOK, info, err)
}

// handleBuildLogs serves the /logs variant: a page of the kept entries by
// time (store.Catalog.LogPage), forward by default.
func (s *templateHandlers) handleBuildLogs(w http.ResponseWriter, r *http.Request) error {
	cursor, limit, level, err := buildLogsQuery(r, "cursor", -1)
	if err != nil {
		return err
	}
	direction, err := queryDirection(r, "forward")
	if err != nil {
		return err
	}
	if source := r.URL.Query().Get("source"); source != "" && source != "temporary" && source != "persistent" {
		return failure.New(failure.Invalid, "source %q must be temporary or persistent", source)
	}
	logs, err := s.builds.Logs(r.PathValue("templateID"), r.PathValue("buildID"),
		store.LogQuery{Cursor: cursor, Backward: direction == "backward", Limit: int(limit), MinLevel: level})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e2b.TemplateBuildLogsResponse{Logs: logs})
	return nil
}
