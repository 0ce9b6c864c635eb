// Package sandboxes runs the local server's sandboxes: create (from the
// warm pool or fresh), connect, timeouts, pause and resume, kill,
// snapshots and the reaper that ends them (Manager), and their metrics and
// logs (Observer); over the records of the store and the containers of the
// engine, each reached through the interface declared here. It knows no
// HTTP: the API calls it and answers its errors by their kind (failure).
package sandboxes

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// Catalog is what the sandboxes need of the templates' records
// (store.Catalog): the builds they start from, and snapshots, templates
// whose one build is a sandbox's file system.
type Catalog interface {
	Resolve(ref string) (store.Template, store.Build, error)
	Build(templateID, buildID string) (store.Build, error)
	LookupTemplate(ref string) (store.Template, error)
	Name(t store.Template) string
	TeamSlug() string

	RegisterSnapshot(req store.SnapshotRequest) (store.Snapshot, error)
	FinishBuild(templateID, buildID string, result *store.BuildResult, reason *store.BuildReason) (bool, error)
	Snapshots(sandboxID, templateID, tag string) ([]store.Snapshot, error)
}

// Records is what the sandboxes need of their own records
// (store.Sandboxes).
type Records interface {
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

	// Their logs, kept under a bound and read a page at a time.
	SandboxLogSince(sandboxID string) (time.Time, error)
	AppendSandboxLogs(sandboxID string, bound store.LogBound, entries []store.LogEntry) error
	SandboxLogPage(sandboxID string, q store.LogQuery) ([]store.LogEntry, error)

	PoolRecords
}

// PoolRecords is what the warm pool needs of the records of its
// containers, recorded before they are created (store.Sandboxes).
type PoolRecords interface {
	AddPooled(p store.Pooled) error
	IsPooled(id string) (bool, error)
	PooledSandboxes() ([]store.Pooled, error)
	DeletePooled(ids ...string) error
}

// Engine is what the sandboxes need of the engine (engine.Docker).
type Engine interface {
	// StartSandbox is WarmSandbox then InitSandbox, leaving nothing behind
	// on error.
	StartSandbox(ctx context.Context, spec engine.SandboxSpec) (*engine.Sandbox, error)
	// WarmSandbox starts the sandbox's container and waits for its envd
	// without initialising it (the warm pool's containers); InitSandbox
	// hands its envd the token, env, user and workdir and starts the start
	// command.
	WarmSandbox(ctx context.Context, spec engine.SandboxSpec) (*engine.Sandbox, error)
	InitSandbox(ctx context.Context, spec engine.SandboxSpec) error
	// SetSandboxDeadline moves the time at which the sandbox's container
	// ends itself (SandboxSpec.EndAt), so that it ends on time even while
	// the server is down; a zero end clears it.
	SetSandboxDeadline(ctx context.Context, sandboxID string, end time.Time) error
	// PauseSandbox freezes the sandbox's processes, keeping their memory
	// and its file system; ResumeSandbox thaws them, or, when they are
	// gone (the engine restarted), boots the sandbox again from its file
	// system as spec says.
	PauseSandbox(ctx context.Context, sandboxID string) error
	ResumeSandbox(ctx context.Context, spec engine.SandboxSpec) error
	// EnforceDiskLimits stops the containers whose files grew past their
	// disk limit and returns the sandboxes among them.
	EnforceDiskLimits(ctx context.Context) ([]engine.DiskOverrun, error)
	// StopSandbox removes the sandbox's container; an unknown ID is not an error.
	StopSandbox(ctx context.Context, sandboxID string) error
	// CommitSandbox commits the sandbox's file system as the image of a
	// template's build (a snapshot) and returns its reference;
	// RemoveImage removes one no record owns.
	CommitSandbox(ctx context.Context, spec engine.SnapshotSpec) (string, error)
	RemoveImage(ctx context.Context, image string) error
	// SandboxMetrics samples the sandbox's CPU, memory and disk use.
	SandboxMetrics(ctx context.Context, sandboxID string) (engine.SandboxMetrics, error)
	// SandboxLogs returns the lines the sandbox's container wrote at or
	// after since (the zero time: all), oldest first; only among its last
	// lines when last > 0.
	SandboxLogs(ctx context.Context, sandboxID string, since time.Time, last int) ([]engine.LogLine, error)
	// WatchSandboxEnds calls ended, until ctx ends, for each sandbox
	// container that exits or is removed other than by StopSandbox.
	WatchSandboxEnds(ctx context.Context, ended func(engine.SandboxEnd))
}

// Config configures a Manager; the server's Config fills it.
type Config struct {
	// Domain is answered as the sandboxes' domain (nil when empty).
	Domain            string
	MaxSandboxTimeout time.Duration
	// ReapInterval is how often expired sandboxes (and pooled containers)
	// are looked for.
	ReapInterval time.Duration
	Pool         PoolConfig
	// LogBound is how much of each sandbox's log the store keeps.
	LogBound store.LogBound
	Now      func() time.Time
	Logger   *slog.Logger
	// Stopped is told of every sandbox stopped, so that the proxy drops
	// its connections to it.
	Stopped func(sandboxID string)
}

// Manager runs the sandboxes. Make it with New, end it with Close.
type Manager struct {
	cfg     Config
	catalog Catalog
	records Records
	engine  Engine
	log     *slog.Logger

	// ctx is cancelled by Close; the reaper and the pool's refills run
	// under it.
	ctx    context.Context
	cancel context.CancelFunc
	tasks  sync.WaitGroup

	// mu orders the pool's refills and Close (warmPool.runMu).
	mu           sync.Mutex
	sandboxLocks sandboxLocks

	pool *warmPool
	// starts bounds the containers starting at once.
	starts startSlots
}

// New makes the Manager and starts its reaper and its watch of the engine's
// reports of ended containers (engineEnds); Recover first, when the
// server starts over an earlier run's records.
func New(cfg Config, catalog Catalog, records Records, eng Engine) *Manager {
	s := &Manager{
		cfg: cfg, catalog: catalog, records: records, engine: eng, log: cfg.Logger,
		sandboxLocks: sandboxLocks{locks: map[string]*sandboxLock{}},
		starts:       make(startSlots, maxContainerStarts()),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.pool = newWarmPool(s)
	s.tasks.Go(s.reapLoop)
	s.tasks.Go(engineEnds{s}.watch)
	return s
}

// Recover forgets the sandboxes of an earlier run that ended meanwhile or
// never started, and its pooled containers, and returns the live ones,
// whose containers the engine's clean-up keeps.
func Recover(records Records, now time.Time, log *slog.Logger) (map[string]bool, error) {
	sandboxes, err := records.Sandboxes()
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, sb := range sandboxes {
		// A sandbox still starting when the server died was never handed
		// to its client.
		if sb.Live(now) && !sb.Starting() {
			live[sb.ID] = true
		} else if _, err := records.DeleteSandbox(sb.ID); err != nil {
			return nil, err
		}
	}
	return live, clearPoolRecords(records, log)
}

// Close stops the reaper and the pool's refills, removes the warm pool,
// and stops every sandbox but those that are paused or pause at their end
// (which it pauses, so that they outlive the server as on E2B they
// outlive their timeout).
func (s *Manager) Close(ctx context.Context) error {
	// Under mu, so that no refill starts between the cancel and the Wait.
	s.mu.Lock()
	s.cancel()
	s.mu.Unlock()
	s.tasks.Wait()
	if n := s.pool.dropPool(ctx, func(pooledSandbox) bool { return true }); n > 0 {
		s.log.Info("warm pool: containers removed at shutdown", "count", n)
	}
	sandboxes, err := s.records.Sandboxes()
	errs := []error{err}
	for _, sb := range sandboxes {
		switch {
		case sb.Paused():
		case sb.AutoPause:
			s.pauseAtEnd(ctx, sb.ID)
		default:
			errs = append(errs, s.stop(ctx, sb.ID))
		}
	}
	return errors.Join(errs...)
}

// answer is the Sandbox of create, connect and resume answers.
func (s *Manager) answer(sb store.Sandbox) *e2b.Sandbox {
	var domain *string
	if s.cfg.Domain != "" {
		d := s.cfg.Domain
		domain = &d
	}
	return &e2b.Sandbox{
		TemplateID: sb.TemplateID, SandboxID: sb.ID, Alias: sb.Alias, ClientID: e2b.ClientID,
		EnvdVersion: sb.EnvdVersion, EnvdAccessToken: sb.AccessToken, Domain: domain,
	}
}

// Pool is the warm pool as it is now (for tests).
func (s *Manager) Pool() PoolView { return s.pool.view() }

// PoolReady is the number of pooled containers ready to be handed out
// (for /_local/stats).
func (s *Manager) PoolReady() int { return s.pool.readyNow() }

// DropTemplatePool removes the pooled containers of a template whose
// deletion forgot their records (store.Catalog.DeleteTemplate), before its images
// go.
func (s *Manager) DropTemplatePool(ctx context.Context, templateID string) {
	s.pool.dropTemplate(ctx, templateID)
}
