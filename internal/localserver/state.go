package localserver

import (
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// Store is what the server needs of its state, declared here where it is
// used, by the handlers' areas; store.Store is the one in use.
type Store interface {
	// Templates, their builds and their tags.
	RegisterBuild(req store.RegisterRequest) (store.Registered, error)
	StartBuild(templateID, buildID string, req store.BuildRequest) (store.Build, []string, error)
	FinishBuild(templateID, buildID string, result *store.BuildResult, reason *store.BuildReason) (bool, error)
	FailBuilding(message string) (int, error)
	Build(templateID, buildID string) (store.Build, error)
	Builds(templateID string) ([]store.Build, error)
	Templates() ([]store.Template, error)
	TemplateByID(id string) (store.Template, error)
	LookupTemplate(ref string) (store.Template, error)
	Resolve(ref string) (store.Template, store.Build, error)
	SetPublic(ref string, public bool) (store.Template, error)
	DeleteTemplate(ref string) (store.Template, []store.Build, error)
	AssignTags(target string, tags []string) (string, []string, error)
	DeleteTags(ref string, tags []string) error
	Tags(templateID string) ([]store.Assignment, error)
	Name(t store.Template) string
	TeamSlug() string

	// Build and sandbox logs, each kept under a bound and read a page at a time.
	AppendLogs(buildID string, bound store.LogBound, entries []store.LogEntry) error
	Logs(buildID string, offset, limit int, minLevel string) ([]store.LogEntry, error)
	LogPage(logID string, q store.LogQuery) ([]store.LogEntry, error)
	SandboxLogSince(sandboxID string) (time.Time, error)
	AppendSandboxLogs(sandboxID string, bound store.LogBound, entries []store.LogEntry) error

	// Uploads of build contexts.
	CreateGrant(templateID, hash string, ttl time.Duration) (store.Grant, error)
	Grant(token string) (store.Grant, error)
	CommitUpload(token, path string) (string, error)
	PruneGrants() (int, error)
	ArchivePath(hash string) (string, bool, error)

	// Sandboxes and their snapshots.
	CreateSandbox(sb store.Sandbox) error
	SandboxStarted(id, containerID, envdVersion string) (store.Sandbox, error)
	Sandbox(id string) (store.Sandbox, error)
	Sandboxes() ([]store.Sandbox, error)
	LiveSandboxes() ([]store.Sandbox, error)
	SetSandboxEndAt(id string, endAt time.Time) (store.Sandbox, error)
	ExtendSandboxEndAt(id string, endAt time.Time) (store.Sandbox, error)
	PauseSandbox(id string) (store.Sandbox, error)
	ResumeSandbox(id string, endAt time.Time, autoPause *bool) (store.Sandbox, error)
	DeleteSandbox(id string) (bool, error)
	RegisterSnapshot(req store.SnapshotRequest) (store.Snapshot, error)

	// The warm pool's containers, recorded before they are created.
	AddPooled(p store.Pooled) error
	IsPooled(id string) (bool, error)
	PooledSandboxes() ([]store.Pooled, error)
	DeletePooled(ids ...string) error

	Snapshots(sandboxID, templateID, tag string) ([]store.Snapshot, error)

	Stats() (store.Stats, error)
	Close() error
}

var _ Store = (*store.Store)(nil)
