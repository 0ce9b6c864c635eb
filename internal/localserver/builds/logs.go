package builds

import (
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// maxLogPage is the most log entries one answer carries.
const maxLogPage = 100

// Status is the build's status with a page of its log from offset: at most
// limit entries (100 at most) at or above level.
func (s *Manager) Status(templateID, buildID string, offset, limit int, level string) (e2b.TemplateBuildInfo, error) {
	b, err := s.catalog.Build(templateID, buildID)
	if err != nil {
		return e2b.TemplateBuildInfo{}, failure.MissingAs(err, failure.Invalid, "Build '%s' not found", buildID)
	}
	info := e2b.TemplateBuildInfo{
		TemplateID: templateID, BuildID: buildID, Status: b.Status,
		Logs: []string{}, LogEntries: []e2b.BuildLogEntry{}, Reason: wireReason(b.Reason),
	}
	if b.Status != e2b.BuildWaiting {
		entries, err := s.catalog.Logs(buildID, offset, min(limit, maxLogPage), level)
		if err != nil {
			return e2b.TemplateBuildInfo{}, failure.OwnFailure(err)
		}
		info.LogEntries = wireLogEntries(entries)
	}
	return info, nil
}

// Logs is a page of the build's kept log by time (store.Catalog.LogPage): at most
// 100 entries.
func (s *Manager) Logs(templateID, buildID string, q store.LogQuery) ([]e2b.BuildLogEntry, error) {
	if _, err := s.catalog.Build(templateID, buildID); err != nil {
		return nil, err
	}
	q.Limit = min(q.Limit, maxLogPage)
	out, err := s.catalog.LogPage(buildID, q)
	if err != nil {
		return nil, failure.OwnFailure(err)
	}
	return wireLogEntries(out), nil
}
