package api

import (
	"context"
	"io"
	"net"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// The backends the handlers call, declared here where they are used;
// builds.Manager, sandboxes.Manager, store.Store and the engine are the
// ones in use.

// Builds is what the template, tag, upload and build endpoints call.
type Builds interface {
	Register(req e2b.TemplateBuildRequestV3) (e2b.TemplateRequestResponseV3, error)
	Templates() ([]e2b.Template, error)
	Template(id string) (e2b.TemplateWithBuilds, error)
	Delete(ctx context.Context, ref string) error
	Update(ref string, public *bool) (e2b.TemplateUpdateResponse, error)
	Alias(ref string) (e2b.TemplateAliasResponse, error)
	AssignTags(req e2b.AssignTemplateTagsRequest) (e2b.AssignedTemplateTags, error)
	DeleteTags(req e2b.DeleteTemplateTagsRequest) error
	Tags(ref string) ([]e2b.TemplateTag, error)

	FileLink(templateID, hash string) (present bool, token string, err error)
	Upload(token string, size int64, body io.Reader) error

	CheckBuild(templateID, buildID string) error
	Start(templateID, buildID string, req e2b.TemplateBuildStartV2) error
	Status(templateID, buildID string, offset, limit int, level string) (e2b.TemplateBuildInfo, error)
	Logs(templateID, buildID string, q store.LogQuery) ([]e2b.BuildLogEntry, error)
}

// Sandboxes is what the sandbox and snapshot endpoints and the proxy call.
type Sandboxes interface {
	Create(ctx context.Context, req e2b.NewSandbox, defaultTimeout int32, secure bool) (*e2b.Sandbox, error)
	Get(id string) (e2b.SandboxDetail, error)
	List(metadata map[string]string, states []string) ([]e2b.ListedSandbox, error)
	Kill(ctx context.Context, id string) error
	SetTimeout(ctx context.Context, id string, seconds int32) error
	Connect(ctx context.Context, id string, timeout *int32, def int32) (*e2b.Sandbox, bool, error)
	Refresh(ctx context.Context, id string, seconds int32) error
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string, timeout *int32, autoPause *bool) (*e2b.Sandbox, error)
	// Reach is nil when traffic may go to the sandbox (resuming it when
	// traffic resumes it).
	Reach(ctx context.Context, id string) error

	Snapshot(ctx context.Context, id, name string) (e2b.SnapshotInfo, error)
	Snapshots(sandboxID, rawName string) ([]e2b.SnapshotInfo, error)

	PoolReady() int
}

// Observer is what the sandbox metrics and log endpoints call.
type Observer interface {
	Metrics(ctx context.Context, id string, start, end int64) ([]e2b.SandboxMetric, error)
	LatestMetrics(ctx context.Context, ids []string) (map[string]e2b.SandboxMetric, error)
	Logs(ctx context.Context, id string, start, limit int64) (e2b.SandboxLogs, error)
	LogPage(ctx context.Context, id string, q store.LogQuery, search string) ([]e2b.SandboxLogEntry, error)
}

// Stats is what /_local/stats reports of the store.
type Stats interface {
	Stats() (store.Stats, error)
}

// Dialer opens a stream to a port inside a sandbox (envd's, or any a
// sandbox process listens on), for the proxy.
type Dialer interface {
	DialSandbox(ctx context.Context, sandboxID string, port int) (net.Conn, error)
}
