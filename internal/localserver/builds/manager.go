// Package builds runs the local server's templates and their builds:
// registration, tags, the intake of uploaded build contexts (checked once,
// here), the start of a build, the runner that drives it on the engine,
// and its log. It knows no HTTP: the API calls it and answers its errors by
// their kind (failure). The store's catalog and uploads and the engine are
// the small interfaces declared here.
package builds

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// Catalog is what the builds need of the templates' records
// (store.Catalog): templates, tags, builds and build logs.
type Catalog interface {
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

	AppendLogs(buildID string, bound store.LogBound, entries []store.LogEntry) error
	Logs(buildID string, offset, limit int, minLevel string) ([]store.LogEntry, error)
	LogPage(buildID string, q store.LogQuery) ([]store.LogEntry, error)
}

// Uploads is what the builds need of the upload grants and stored archives
// (store.Uploads).
type Uploads interface {
	CreateGrant(templateID, hash string, ttl time.Duration) (store.Grant, error)
	Grant(token string) (store.Grant, error)
	CommitUpload(token, path string) (string, error)
	ArchivePath(hash string) (string, bool, error)
	PruneGrants() (int, error)
}

// Engine is what the builds need of the engine (engine.Docker).
type Engine interface {
	// Build blocks until the build ends. Cancelling ctx aborts it and
	// removes its container; failures are *engine.StepError where a step
	// is known.
	Build(ctx context.Context, spec engine.BuildSpec) (*engine.BuildResult, error)
	// RemoveImage removes a build's image when its template is deleted.
	RemoveImage(ctx context.Context, image string) error
}

// Config configures a Manager; the server's Config fills it.
type Config struct {
	MaxCPUCount int32
	MaxMemoryMB int32
	// MaxBuildTime bounds a build from its start, as E2B's one hour does.
	MaxBuildTime time.Duration
	// LogBound is how much of each build's log the store keeps.
	LogBound store.LogBound

	// ArchiveDir holds the stored archives, SpoolDir the uploads arriving.
	ArchiveDir, SpoolDir string
	UploadURLTTL         time.Duration
	// The limits of an upload, the one check of a COPY archive.
	MaxUploadBytes    int64
	MaxUnpackedBytes  int64
	MaxArchiveEntries int

	Now    func() time.Time
	Logger *slog.Logger
	// Deleting is told of a template being deleted, before its images go
	// (the warm pool's containers hold them).
	Deleting func(ctx context.Context, templateID string)

	// AppendLogs stores build log entries (the store's AppendLogs within
	// LogBound when nil); tests inject faults such as a full disk here.
	AppendLogs func(buildID string, entries []store.LogEntry) error
	// WriteSpool writes part of an upload to its spool file (f.Write when
	// nil); tests inject a full disk here, which needs no privileges.
	WriteSpool func(f *os.File, p []byte) (int, error)
}

// Reasons recorded on builds this server ended.
const (
	ReasonRestarted = "the local server restarted while the build was running"
	ReasonShutdown  = "server shut down"
)

// Manager runs the templates' builds. Make it with New, end it with Close.
type Manager struct {
	cfg     Config
	catalog Catalog
	uploads Uploads
	engine  Engine
	log     *slog.Logger

	// ctx is cancelled by Close; builds run under it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	tasks  sync.WaitGroup

	mu      sync.Mutex
	running map[string]*runningBuild // by build ID
}

// New makes the Manager and starts the pruning of expired upload grants;
// Recover first, when the server starts over an earlier run's records.
func New(cfg Config, catalog Catalog, uploads Uploads, eng Engine) *Manager {
	s := &Manager{cfg: cfg, catalog: catalog, uploads: uploads, engine: eng, log: cfg.Logger, running: map[string]*runningBuild{}}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.tasks.Go(s.pruneGrantsLoop)
	return s
}

// Recover cleans up after an earlier run that may have been killed: its
// running builds are failed, its expired upload grants pruned and its
// upload spools (incomplete uploads, whose grants stay usable) removed.
func Recover(catalog Catalog, uploads Uploads, spoolDir string, log *slog.Logger) error {
	n, err := catalog.FailBuilding(ReasonRestarted)
	if err != nil {
		return err
	}
	if n > 0 {
		log.Info("builds interrupted by the previous run marked as failed", "count", n)
	}
	if n, err := uploads.PruneGrants(); err != nil {
		return err
	} else if n > 0 {
		log.Info("expired upload grants pruned", "count", n)
	}
	if spools, err := os.ReadDir(spoolDir); err == nil {
		for _, e := range spools {
			os.Remove(filepath.Join(spoolDir, e.Name()))
		}
	}
	return nil
}

// Close fails running builds with "server shut down" and waits for them
// to wind down until ctx ends; builds that did not end by then are failed
// in the store.
func (s *Manager) Close(ctx context.Context) {
	// Under mu, so that no build starts between the cancel and the Wait.
	s.mu.Lock()
	s.cancel(errors.New(ReasonShutdown))
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.tasks.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		if _, err := s.catalog.FailBuilding(ReasonShutdown); err != nil {
			s.log.Error("mark builds failed at shutdown", "err", err)
		}
	}
}

// OwnedImages is the set of images the ready builds of live templates own,
// for the start-up clean-up: a build the previous run was killed in may
// have committed one no record owns.
func OwnedImages(catalog Catalog) (map[string]bool, error) {
	templates, err := catalog.Templates()
	if err != nil {
		return nil, err
	}
	owned := map[string]bool{}
	for _, t := range templates {
		builds, err := catalog.Builds(t.ID)
		if err != nil {
			return nil, err
		}
		for _, b := range builds {
			if b.Status == e2b.BuildReady && b.Result != nil && b.Result.Image != "" {
				owned[b.Result.Image] = true
			}
		}
	}
	return owned, nil
}
