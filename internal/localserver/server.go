// Package localserver is the local E2B-compatible server: the control-plane
// API of design/e2b-api.md (templates, builds, uploads, tags, sandboxes), the proxy
// to each sandbox's envd, and Run, which the `server` command
// (internal/command) starts it with. State lives in the store; builds and
// sandboxes run on an Engine.
package localserver

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/cors"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
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
	Pool PoolConfig
	// Now is the clock (time.Now when nil); tests move it to expire sandboxes.
	Now    func() time.Time
	Logger *slog.Logger

	// appendLogs stores build log entries (the store's AppendLogs within
	// LogBound when nil); tests inject faults such as a full disk here.
	appendLogs func(buildID string, entries []store.LogEntry) error
	// writeSpool writes part of an upload to its spool file (f.Write when
	// nil); tests inject a full disk here, which needs no privileges.
	writeSpool func(f *os.File, p []byte) (int, error)
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

// Reasons recorded on builds this server ended.
const (
	ReasonRestarted = "the local server restarted while the build was running"
	ReasonShutdown  = "server shut down"
)

// Server serves the API. Create it with New, serve Handler, end with Close.
type Server struct {
	cfg    Config
	store  Store
	engine Engine
	log    *slog.Logger
	mux    *http.ServeMux
	// api serves upload PUTs and the API, behind apiCORS.
	api http.Handler

	archiveDir, spoolDir string

	// ctx is cancelled by Close; builds and the reaper run under it.
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	running map[string]*runningBuild // by build ID
	proxies map[string]*sandboxProxy // by sandbox ID
	tasks   sync.WaitGroup

	// sandboxLocks serialise each sandbox's pauses, resumes and
	// snapshots (lockSandbox), by sandbox ID.
	sandboxLocks map[string]*sandboxLock

	pool warmPool
	// starts holds a token for every sandbox container starting
	// (startSlot).
	starts chan struct{}
}

// New opens the state in cfg.DataDir, recovers from an earlier run (builds
// that were running are failed, containers no sandbox claims removed) and
// starts the sandbox reaper.
func New(ctx context.Context, cfg Config, eng Engine) (*Server, error) {
	cfg.applyDefaults()
	if cfg.DataDir == "" {
		return nil, errors.New("a data directory is required")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("an API key is required")
	}
	s := &Server{
		cfg: cfg, engine: eng, log: cfg.Logger,
		archiveDir: filepath.Join(cfg.DataDir, "archives"),
		spoolDir:   filepath.Join(cfg.DataDir, "uploads"),
		running:    map[string]*runningBuild{},
		proxies:    map[string]*sandboxProxy{},

		sandboxLocks: map[string]*sandboxLock{},
		pool:         newWarmPool(),
		starts:       make(chan struct{}, maxContainerStarts()),
	}
	for _, dir := range []string{cfg.DataDir, s.archiveDir, s.spoolDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create data directory %s: %w", dir, err)
		}
	}
	st, err := store.Open(filepath.Join(cfg.DataDir, "state.db"), cfg.TeamSlug, cfg.Now)
	if err != nil {
		return nil, err
	}
	s.store = st
	if err := s.recover(ctx); err != nil {
		st.Close()
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.mux = s.routes()
	s.api = apiCORS.Handler(s.handle(s.serveAPI))
	s.tasks.Go(s.reapLoop)
	s.tasks.Go(func() { s.engine.WatchSandboxEnds(s.ctx, s.sandboxEnded) })
	return s, nil
}

// recover cleans up after a previous run that may have been killed.
func (s *Server) recover(ctx context.Context) error {
	n, err := s.store.FailBuilding(ReasonRestarted)
	if err != nil {
		return err
	}
	if n > 0 {
		s.log.Info("builds interrupted by the previous run marked as failed", "count", n)
	}
	if n, err := s.store.PruneGrants(); err != nil {
		return err
	} else if n > 0 {
		s.log.Info("expired upload grants pruned", "count", n)
	}
	// Leftover upload spools are incomplete uploads; their grants stay usable.
	if spools, err := os.ReadDir(s.spoolDir); err == nil {
		for _, e := range spools {
			os.Remove(filepath.Join(s.spoolDir, e.Name()))
		}
	}
	sandboxes, err := s.store.Sandboxes()
	if err != nil {
		return err
	}
	live := map[string]bool{}
	now := s.cfg.Now()
	for _, sb := range sandboxes {
		if sb.Live(now) {
			live[sb.ID] = true
		} else if _, err := s.store.DeleteSandbox(sb.ID); err != nil {
			return err
		}
	}
	if err := s.clearPoolRecords(); err != nil {
		return err
	}
	images, err := s.ownedImages()
	if err != nil {
		return err
	}
	if err := s.engine.RemoveOrphans(ctx, func(id string) bool { return live[id] }, func(ref string) bool { return images[ref] }); err != nil {
		return fmt.Errorf("remove containers and images left by an earlier run: %w", err)
	}
	return nil
}

// ownedImages is the set of images the ready builds of live templates own;
// a build the previous run was killed in may have committed one no record
// owns.
func (s *Server) ownedImages() (map[string]bool, error) {
	templates, err := s.store.Templates()
	if err != nil {
		return nil, err
	}
	owned := map[string]bool{}
	for _, t := range templates {
		builds, err := s.store.Builds(t.ID)
		if err != nil {
			return nil, err
		}
		for _, b := range builds {
			if b.Status == e2bapi.BuildReady && b.Result != nil && b.Result.Image != "" {
				owned[b.Result.Image] = true
			}
		}
	}
	return owned, nil
}

// Store is the server's state (for tests and the command).
func (s *Server) Store() Store { return s.store }

// Close fails running builds with "server shut down", removes the warm
// pool, stops every sandbox but those that are paused or pause at their
// end (which it pauses, so that they outlive the server as on E2B they
// outlive their timeout) and closes the state. ctx bounds the wait for builds to wind down.
func (s *Server) Close(ctx context.Context) error {
	// Under mu, so that no build starts between the cancel and the Wait.
	s.mu.Lock()
	s.cancel(errors.New(ReasonShutdown))
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.tasks.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		// Builds that did not end in time are still failed in the store.
		if _, err := s.store.FailBuilding(ReasonShutdown); err != nil {
			s.log.Error("mark builds failed at shutdown", "err", err)
		}
	}
	if n := s.dropPool(ctx, func(pooledSandbox) bool { return true }); n > 0 {
		s.log.Info("warm pool: containers removed at shutdown", "count", n)
	}
	var errs []error
	sandboxes, err := s.store.Sandboxes()
	errs = append(errs, err)
	for _, sb := range sandboxes {
		switch {
		case sb.Paused():
		case sb.AutoPause:
			s.pauseAtEnd(ctx, sb.ID)
		default:
			errs = append(errs, s.stopSandbox(ctx, sb.ID))
		}
	}
	s.mu.Lock()
	for id, p := range s.proxies {
		p.transport.CloseIdleConnections()
		delete(s.proxies, id)
	}
	s.mu.Unlock()
	errs = append(errs, s.store.Close())
	return errors.Join(errs...)
}

// apiCORS is E2B's API's answer to browser pages (gin-contrib/cors with
// packages/api/internal/middleware/cors.go's lists and its 12 h default
// preflight cache): the headers the SDKs send, the list endpoints' and rate
// limits' headers exposed.
var apiCORS = cors.Policy{
	AllowHeaders: []string{
		"Origin", "Content-Length", "Content-Type", "User-Agent",
		"Authorization", "X-API-Key", "X-Team-ID",
		"browser", "lang", "lang_version", "machine", "os", "package_version",
		"processor", "publisher", "release", "sdk_runtime", "system",
	},
	ExposeHeaders: []string{
		"X-Next-Token", "X-Total-Running",
		"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After",
	},
	MaxAge: 12 * time.Hour,
}

// Handler is the server's HTTP handler: envd proxy, upload PUTs, and the
// authenticated API.
func (s *Server) Handler() http.Handler { return s.handle(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) error {
	// Sandbox traffic gets the CORS answers of whatever it reaches (envd's
	// own, or the sandbox's server's).
	if id, port, ok := sandboxTarget(r); ok {
		return s.proxy(w, r, id, port)
	}
	// A preflight of header-routed sandbox traffic names the routing headers
	// without their values, so it arrives here: answer it as envd would.
	if cors.IsPreflight(r) && cors.RequestsHeader(r, envd.HeaderSandboxID) {
		envd.CORS.Preflight(w, r)
		return nil
	}
	s.api.ServeHTTP(w, r)
	return nil
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) error {
	if token, ok := strings.CutPrefix(r.URL.Path, uploadPath); ok {
		return s.handleUpload(w, r, token)
	}
	boundBody(w, r, bodyReadTimeout)
	if r.Method == http.MethodGet && r.URL.Path == "/health" {
		w.WriteHeader(http.StatusNoContent) // readiness probe, no key needed
		return nil
	}
	key := r.Header.Get("X-API-Key")
	if key == "" {
		return answer(http.StatusUnauthorized, "missing X-API-Key header: this server needs its API key")
	}
	if subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) != 1 {
		return answer(http.StatusUnauthorized, "Invalid API key")
	}
	s.mux.ServeHTTP(w, r)
	return nil
}

func (s *Server) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/", s.handle(func(_ http.ResponseWriter, r *http.Request) error {
		return answer(http.StatusNotFound, "no route for %s %s", r.Method, r.URL.Path)
	}))
	m.HandleFunc("GET /_local/stats", s.handle(s.handleStats))

	m.HandleFunc("POST /v3/templates", s.handle(s.handleRegister))
	m.HandleFunc("GET /v2/templates", s.handle(s.handleListTemplatesV2))
	m.HandleFunc("GET /templates", s.handle(s.handleListTemplates))
	m.HandleFunc("GET /templates/{templateID}", s.handle(s.handleGetTemplate))
	// /templates/aliases/{alias} and /templates/{id}/tags overlap, so
	// these dispatch on their own.
	m.HandleFunc("GET /templates/{a}/{b}", s.handle(s.handleTemplateAliasOrTags))
	m.HandleFunc("GET /templates/{a}/{b}/{c}", s.handle(s.handleTemplateFileOrNamespacedAlias))
	m.HandleFunc("DELETE /templates/{templateID}", s.handle(s.handleDeleteTemplate))
	m.HandleFunc("PATCH /v2/templates/{templateID}", s.handle(s.handlePatchTemplate))
	m.HandleFunc("POST /v2/templates/{templateID}/builds/{buildID}", s.handle(s.handleStartBuild))
	m.HandleFunc("GET /templates/{templateID}/builds/{buildID}/status", s.handle(s.handleBuildStatus))
	m.HandleFunc("GET /templates/{templateID}/builds/{buildID}/logs", s.handle(s.handleBuildLogs))
	m.HandleFunc("POST /templates/tags", s.handle(s.handleAssignTags))
	m.HandleFunc("DELETE /templates/tags", s.handle(s.handleDeleteTags))

	m.HandleFunc("POST /v2/sandboxes", s.handle(s.handleCreateSandbox))
	m.HandleFunc("POST /sandboxes", s.handle(s.handleCreateSandboxV1))
	m.HandleFunc("GET /sandboxes", s.handle(s.handleListSandboxes))
	m.HandleFunc("GET /v2/sandboxes", s.handle(s.handleListSandboxesV2))
	m.HandleFunc("GET /sandboxes/{sandboxID}", s.handle(s.handleGetSandbox))
	m.HandleFunc("DELETE /sandboxes/{sandboxID}", s.handle(s.handleDeleteSandbox))
	m.HandleFunc("POST /sandboxes/{sandboxID}/timeout", s.handle(s.handleSandboxTimeout))
	m.HandleFunc("POST /v2/sandboxes/{sandboxID}/connect", s.handle(s.handleConnectSandbox))
	m.HandleFunc("POST /sandboxes/{sandboxID}/connect", s.handle(s.handleConnectSandboxV1))
	m.HandleFunc("POST /sandboxes/{sandboxID}/refreshes", s.handle(s.handleRefreshSandbox))
	m.HandleFunc("POST /sandboxes/{sandboxID}/pause", s.handle(s.handlePauseSandbox))
	m.HandleFunc("POST /sandboxes/{sandboxID}/resume", s.handle(s.handleResumeSandbox))
	m.HandleFunc("GET /sandboxes/metrics", s.handle(s.handleSandboxesMetrics))
	m.HandleFunc("GET /sandboxes/{sandboxID}/metrics", s.handle(s.handleSandboxMetrics))
	m.HandleFunc("GET /sandboxes/{sandboxID}/logs", s.handle(s.handleSandboxLogs))
	m.HandleFunc("GET /v2/sandboxes/{sandboxID}/logs", s.handle(s.handleSandboxLogsV2))
	m.HandleFunc("POST /sandboxes/{sandboxID}/snapshots", s.handle(s.handleCreateSnapshot))
	m.HandleFunc("GET /snapshots", s.handle(s.handleListSnapshots))
	return m
}

// handleTemplateAliasOrTags serves GET /templates/aliases/{alias} and
// GET /templates/{id}/tags.
func (s *Server) handleTemplateAliasOrTags(w http.ResponseWriter, r *http.Request) error {
	a, b := r.PathValue("a"), r.PathValue("b")
	switch {
	case a == "aliases":
		return s.handleAlias(w, b)
	case b == "tags":
		return s.handleListTags(w, a)
	default:
		return answer(http.StatusNotFound, "no route for %s %s", r.Method, r.URL.Path)
	}
}

// handleTemplateFileOrNamespacedAlias serves GET /templates/{id}/files/{hash} and an alias
// whose "/" was not escaped: GET /templates/aliases/{namespace}/{alias}.
func (s *Server) handleTemplateFileOrNamespacedAlias(w http.ResponseWriter, r *http.Request) error {
	a, b, c := r.PathValue("a"), r.PathValue("b"), r.PathValue("c")
	switch {
	case a == "aliases":
		return s.handleAlias(w, b+"/"+c)
	case b == "files":
		return s.handleFileLink(w, r, a, c)
	default:
		return answer(http.StatusNotFound, "no route for %s %s", r.Method, r.URL.Path)
	}
}

// serverStats is the answer of /_local/stats: the store's counts and the
// warm pool's containers ready to be handed out (store.Stats.Pooled counts
// those starting too).
type serverStats struct {
	store.Stats
	PoolReady int `json:"poolReady"`
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) error {
	st, err := s.store.Stats()
	if err != nil {
		return internal(err)
	}
	writeJSON(w, http.StatusOK, serverStats{Stats: st, PoolReady: s.poolReady()})
	return nil
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status is sent: a failed write (the client went away) cannot be
	// answered any more.
	_ = json.NewEncoder(w).Encode(body)
}

const maxJSONBody = 8 << 20

// decodeBody decodes the JSON body into v; an empty body leaves v as it is
// when allowEmpty. Its failures are 400 answers.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil {
		return answer(http.StatusBadRequest, "read request body: %v", err)
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		if allowEmpty {
			return nil
		}
		return answer(http.StatusBadRequest, "request body is empty; a JSON object is required")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return answer(http.StatusBadRequest, "invalid request body: %v", err)
	}
	return nil
}
