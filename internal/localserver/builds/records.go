package builds

import (
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// The store keeps records of its own, so that a change of E2B's wire types
// is never a storage migration; these map the records to the wire and back.

// buildRequestRecord is the record of a start request: everything but its
// registry credentials, which are never stored.
func buildRequestRecord(req e2b.TemplateBuildStartV2) store.BuildRequest {
	rec := store.BuildRequest{
		FromImage: req.FromImage, FromTemplate: req.FromTemplate, Force: req.Force,
		StartCmd: req.StartCmd, ReadyCmd: req.ReadyCmd,
		Steps: make([]store.BuildStep, len(req.Steps)),
	}
	for i, st := range req.Steps {
		rec.Steps[i] = store.BuildStep{Type: st.Type, Args: st.Args, FilesHash: st.FilesHash, Force: st.Force}
	}
	return rec
}

// wireReason is a build's failure as the build status answers it.
func wireReason(r *store.BuildReason) *e2b.BuildStatusReason {
	if r == nil {
		return nil
	}
	return &e2b.BuildStatusReason{Message: r.Message, Step: r.Step, LogEntries: wireLogEntries(r.LogEntries)}
}

// wireLogEntries are build log lines as the API answers them; nil stays nil.
func wireLogEntries(entries []store.LogEntry) []e2b.BuildLogEntry {
	if entries == nil {
		return nil
	}
	out := make([]e2b.BuildLogEntry, len(entries))
	for i, e := range entries {
		out[i] = e2b.BuildLogEntry{Timestamp: e.Timestamp, Message: e.Message, Level: e.Level, Step: e.Step}
	}
	return out
}

// wireTags is a template's tag list as GET /templates/{id}/tags answers it.
func wireTags(assignments []store.Assignment) []e2b.TemplateTag {
	out := make([]e2b.TemplateTag, len(assignments))
	for i, a := range assignments {
		out[i] = e2b.TemplateTag{Tag: a.Tag, BuildID: a.BuildID, CreatedAt: a.AssignedAt}
	}
	return out
}
