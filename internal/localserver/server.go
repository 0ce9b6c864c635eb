// Package localserver is the local E2B-compatible server: Run, which the
// `server` command (internal/command) starts it with, and New, which wires
// its parts: the store (bbolt records), the builds' and the sandboxes'
// managers over it and the engine, and the API (HTTP) over them
// (DESIGN.md "The local server's rooms").
package localserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/api"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/builds"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/sandboxes"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// Config configures a Server. Zero limits take the defaults below.
type Config struct {
	// DataDir holds the state database, stored archives and upload spools.
	DataDir string
	// APIKey is the one key every API request must carry in X-API-Key.
	APIKey string
	// TeamSlug is the namespace of every template name (default "local").
	TeamSlug string
	// PublicURL is the base URL clients reach this server at, used in upload
	// URLs; empty means "http://" + the Host the request was sent to.
	PublicURL string
	// Domain is answered as the sandboxes' domain (nil when empty).
	Domain string

	MaxUploadBytes    int64
	MaxUnpackedBytes  int64
	MaxArchiveEntries int
	UploadURLTTL      time.Duration
	MaxCPUCount       int32
	MaxMemoryMB       int32
	MaxSandboxTimeout time.Duration
	// MaxBuildTime bounds a build from its start, as E2B's one hour does: a
	// RUN step held open by a background process fails the build then.
	MaxBuildTime time.Duration
	// LogBound is how much of each build's and sandbox's log the store keeps.
	LogBound store.LogBound
	// ReapInterval is how often expired sandboxes (and pooled containers)
	// are looked for.
	ReapInterval time.Duration
	// Pool bounds the warm pool; the zero value turns it off.
	Pool sandboxes.PoolConfig
	// Now is the clock (time.Now when nil); tests move it to expire sandboxes.
	Now    func() time.Time
	Logger *slog.Logger

	// appendLogs stores build log entries (the store's AppendLogs within
	// LogBound when nil); tests inject faults such as a full disk here.
	appendLogs func(buildID string, entries []store.LogEntry) error
	// writeSpool writes part of an upload to its spool file (f.Write when
	// nil); tests inject a full disk here, which needs no privileges.
	writeSpool func(f *os.File, p []byte) (int, error)
	// bodyReadTimeout bounds an API request's body
	// (api.DefaultBodyReadTimeout when zero); tests shorten it.
	bodyReadTimeout time.Duration
}

// Defaults of the limits in Config.
const (
	// DefaultDomain is a bare DNS name, so that a provider configured from
	// the printed E2B_DOMAIN accepts it; *.localhost resolves to loopback.
	DefaultDomain            = "localhost"
	DefaultTeamSlug          = "local"
	DefaultMaxUploadBytes    = 1 << 30
	DefaultMaxUnpackedBytes  = 4 << 30
	DefaultMaxArchiveEntries = 200_000
	DefaultUploadURLTTL      = time.Hour
	DefaultMaxCPUCount       = 8
	DefaultMaxMemoryMB       = 16384
	DefaultMaxSandboxTimeout = 24 * time.Hour
	DefaultMaxBuildTime      = time.Hour
	DefaultMaxLogEntries     = store.DefaultMaxLogEntries
	DefaultMaxLogBytes       = store.DefaultMaxLogBytes
	DefaultReapInterval      = time.Second
)

func (c *Config) applyDefaults() {
	if c.TeamSlug == "" {
		c.TeamSlug = DefaultTeamSlug
	}
	if c.MaxUploadBytes <= 0 {
		c.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if c.MaxUnpackedBytes <= 0 {
		c.MaxUnpackedBytes = DefaultMaxUnpackedBytes
	}
	if c.MaxArchiveEntries <= 0 {
		c.MaxArchiveEntries = DefaultMaxArchiveEntries
	}
	if c.UploadURLTTL <= 0 {
		c.UploadURLTTL = DefaultUploadURLTTL
	}
	if c.MaxCPUCount <= 0 {
		c.MaxCPUCount = DefaultMaxCPUCount
	}
	if c.MaxMemoryMB <= 0 {
		c.MaxMemoryMB = DefaultMaxMemoryMB
	}
	if c.MaxSandboxTimeout <= 0 {
		c.MaxSandboxTimeout = DefaultMaxSandboxTimeout
	}
	if c.MaxBuildTime <= 0 {
		c.MaxBuildTime = DefaultMaxBuildTime
	}
	if c.LogBound.MaxEntries <= 0 {
		c.LogBound.MaxEntries = DefaultMaxLogEntries
	}
	if c.LogBound.MaxBytes <= 0 {
		c.LogBound.MaxBytes = DefaultMaxLogBytes
	}
	if c.ReapInterval <= 0 {
		c.ReapInterval = DefaultReapInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// What the data directory holds: the records, the stored build contexts
// and the uploads arriving.
const (
	stateFile      = "state.db"
	archiveDirName = "archives"
	spoolDirName   = "uploads"
)

// Server is the local server, its parts wired: the store, the builds' and
// the sandboxes' managers over it and the engine, and the API over them.
// Create it with New, serve Handler, end with Close.
type Server struct {
	cfg    Config
	store  *store.Store
	engine Engine
	log    *slog.Logger

	builds    *builds.Manager
	sandboxes *sandboxes.Manager
	proxies   *api.Proxies
	api       *api.Server
}

// New opens the state in cfg.DataDir, recovers from an earlier run (builds
// that were running are failed, containers no sandbox claims removed) and
// starts the builds' and the sandboxes' managers and the API over them.
func New(ctx context.Context, cfg Config, eng Engine) (*Server, error) {
	cfg.applyDefaults()
	if cfg.DataDir == "" {
		return nil, errors.New("a data directory is required")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("an API key is required")
	}
	archiveDir, spoolDir := filepath.Join(cfg.DataDir, archiveDirName), filepath.Join(cfg.DataDir, spoolDirName)
	for _, dir := range []string{cfg.DataDir, archiveDir, spoolDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create data directory %s: %w", dir, err)
		}
	}
	st, err := store.Open(filepath.Join(cfg.DataDir, stateFile), cfg.TeamSlug, cfg.Now)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, store: st, engine: eng, log: cfg.Logger}
	if err := s.recover(ctx, spoolDir); err != nil {
		st.Close()
		return nil, err
	}
	s.proxies = api.NewProxies(eng, cfg.Logger)
	sbCfg := sandboxes.Config{
		Domain: cfg.Domain, MaxSandboxTimeout: cfg.MaxSandboxTimeout, ReapInterval: cfg.ReapInterval,
		Pool: cfg.Pool, LogBound: cfg.LogBound, Now: cfg.Now, Logger: cfg.Logger, Stopped: s.proxies.Drop,
	}
	s.sandboxes = sandboxes.New(sbCfg, st.Catalog, st.Sandboxes, eng)
	s.builds = builds.New(builds.Config{
		MaxCPUCount: cfg.MaxCPUCount, MaxMemoryMB: cfg.MaxMemoryMB, MaxBuildTime: cfg.MaxBuildTime, LogBound: cfg.LogBound,
		ArchiveDir: archiveDir, SpoolDir: spoolDir, UploadURLTTL: cfg.UploadURLTTL,
		MaxUploadBytes: cfg.MaxUploadBytes, MaxUnpackedBytes: cfg.MaxUnpackedBytes, MaxArchiveEntries: cfg.MaxArchiveEntries,
		Now: cfg.Now, Logger: cfg.Logger, Deleting: s.sandboxes.DropTemplatePool,
		AppendLogs: cfg.appendLogs, WriteSpool: cfg.writeSpool,
	}, st.Catalog, st.Uploads, eng)
	s.api = api.New(api.Config{
		APIKey: cfg.APIKey, PublicURL: cfg.PublicURL, BodyReadTimeout: cfg.bodyReadTimeout, Logger: cfg.Logger,
	}, s.builds, s.sandboxes, sandboxes.NewObserver(sbCfg, st.Sandboxes, eng), st, s.proxies)
	return s, nil
}

// recover cleans up after a previous run that may have been killed: the
// builds' and the sandboxes' records, then the containers and images no
// record claims.
func (s *Server) recover(ctx context.Context, spoolDir string) error {
	c, err := recoverClaims(s.store, spoolDir, s.cfg.Now(), s.log)
	if err != nil {
		return err
	}
	if err := s.engine.RemoveOrphans(ctx, c.sandbox, c.image); err != nil {
		return fmt.Errorf("remove containers and images left by an earlier run: %w", err)
	}
	return nil
}

// claims are what the records own on the engine: the containers of live
// sandboxes and the images of ready builds.
type claims struct {
	sandboxes, images map[string]bool
}

func (c claims) sandbox(id string) bool { return c.sandboxes[id] }
func (c claims) image(ref string) bool  { return c.images[ref] }

// recoverClaims brings an earlier run's records up to date (builds that
// were running failed, sandboxes that ended forgotten) and returns what
// they own on the engine: what a start and `server prune` keep.
func recoverClaims(st *store.Store, spoolDir string, now time.Time, log *slog.Logger) (claims, error) {
	if err := builds.Recover(st.Catalog, st.Uploads, spoolDir, log); err != nil {
		return claims{}, err
	}
	live, err := sandboxes.Recover(st.Sandboxes, now, log)
	if err != nil {
		return claims{}, err
	}
	images, err := builds.OwnedImages(st.Catalog)
	return claims{sandboxes: live, images: images}, err
}

// Handler is the server's HTTP handler: envd proxy, upload PUTs, and the
// authenticated API.
func (s *Server) Handler() http.Handler { return s.api.Handler() }

// Store is the server's state (for tests).
func (s *Server) Store() *store.Store { return s.store }

// Close fails running builds with "server shut down" (ctx bounds the wait
// for them to wind down), closes the sandboxes (sandboxes.Manager.Close)
// and the proxies' connections, and closes the state.
func (s *Server) Close(ctx context.Context) error {
	s.builds.Close(ctx)
	errs := []error{s.sandboxes.Close(ctx)}
	s.proxies.Close()
	errs = append(errs, s.store.Close())
	return errors.Join(errs...)
}
