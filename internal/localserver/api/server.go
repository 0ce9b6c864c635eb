// Package api is the local server's HTTP layer: the routes of E2B's
// control-plane API, their handlers (each reads its request, calls the
// builds or sandboxes manager once and writes the answer), the proxy of
// sandbox traffic and the one table that answers errors by their kind
// (errors.go). The managers are the interfaces of backends.go, declared
// here where they are used.
package api

import (
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/cors"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// Config configures the API.
type Config struct {
	// APIKey is the one key every API request must carry in X-API-Key.
	APIKey string
	// PublicURL is the base URL clients reach this server at, used in upload
	// URLs; empty means "http://" + the Host the request was sent to.
	PublicURL string
	// BodyReadTimeout bounds the arrival of an API request's body,
	// UploadReadTimeout an upload's (DefaultBodyReadTimeout and
	// DefaultUploadReadTimeout when zero).
	BodyReadTimeout, UploadReadTimeout time.Duration
	Logger                             *slog.Logger
}

// Server serves the API. Make it with New and serve Handler.
type Server struct {
	cfg       Config
	log       *slog.Logger
	templates *templateHandlers
	sandboxes *sandboxHandlers
	stats     Stats
	mux       *http.ServeMux
	// api serves upload PUTs and the API, behind apiCORS.
	api http.Handler
}

// New makes the API over the managers, the sandboxes' observer, the store's counts and the proxies
// to the sandboxes.
func New(cfg Config, b Builds, sb Sandboxes, obs Observer, stats Stats, proxies *Proxies) *Server {
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.UploadReadTimeout <= 0 {
		cfg.UploadReadTimeout = DefaultUploadReadTimeout
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, stats: stats,
		templates: &templateHandlers{builds: b, cfg: cfg},
		sandboxes: &sandboxHandlers{sandboxes: sb, observer: obs, proxies: proxies},
	}
	s.mux = s.routes()
	s.api = apiCORS.Handler(s.handle(s.serveAPI))
	return s
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
		return s.sandboxes.proxy(w, r, id, port)
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
	if token, ok := strings.CutPrefix(r.URL.Path, UploadPath); ok {
		return s.templates.handleUpload(w, r, token)
	}
	boundBody(w, r, s.cfg.BodyReadTimeout)
	if r.Method == http.MethodGet && r.URL.Path == "/health" {
		w.WriteHeader(http.StatusNoContent) // readiness probe, no key needed
		return nil
	}
	key := r.Header.Get("X-API-Key")
	if key == "" {
		return failure.New(failure.Unauthorized, "missing X-API-Key header: this server needs its API key")
	}
	if subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) != 1 {
		return failure.New(failure.Unauthorized, "Invalid API key")
	}
	s.mux.ServeHTTP(w, r)
	return nil
}

func (s *Server) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/", s.handle(func(_ http.ResponseWriter, r *http.Request) error {
		return failure.New(failure.NotFound, "no route for %s %s", r.Method, r.URL.Path)
	}))
	m.HandleFunc("GET /_local/stats", s.handle(s.handleStats))

	m.HandleFunc("POST /v3/templates", s.handle(s.templates.handleRegister))
	m.HandleFunc("GET /v2/templates", s.handle(s.templates.handleListTemplatesV2))
	m.HandleFunc("GET /templates", s.handle(s.templates.handleListTemplates))
	m.HandleFunc("GET /templates/{templateID}", s.handle(s.templates.handleGetTemplate))
	// /templates/aliases/{alias} and /templates/{id}/tags overlap, so
	// these dispatch on their own.
	m.HandleFunc("GET /templates/{a}/{b}", s.handle(s.handleTemplateAliasOrTags))
	m.HandleFunc("GET /templates/{a}/{b}/{c}", s.handle(s.handleTemplateFileOrNamespacedAlias))
	m.HandleFunc("DELETE /templates/{templateID}", s.handle(s.templates.handleDeleteTemplate))
	m.HandleFunc("PATCH /v2/templates/{templateID}", s.handle(s.templates.handlePatchTemplate))
	m.HandleFunc("POST /v2/templates/{templateID}/builds/{buildID}", s.handle(s.templates.handleStartBuild))
	m.HandleFunc("GET /templates/{templateID}/builds/{buildID}/status", s.handle(s.templates.handleBuildStatus))
	m.HandleFunc("GET /templates/{templateID}/builds/{buildID}/logs", s.handle(s.templates.handleBuildLogs))
	m.HandleFunc("POST /templates/tags", s.handle(s.templates.handleAssignTags))
	m.HandleFunc("DELETE /templates/tags", s.handle(s.templates.handleDeleteTags))

	m.HandleFunc("POST /v2/sandboxes", s.handle(s.sandboxes.handleCreateSandbox))
	m.HandleFunc("POST /sandboxes", s.handle(s.sandboxes.handleCreateSandboxV1))
	m.HandleFunc("GET /sandboxes", s.handle(s.sandboxes.handleListSandboxes))
	m.HandleFunc("GET /v2/sandboxes", s.handle(s.sandboxes.handleListSandboxesV2))
	m.HandleFunc("GET /sandboxes/{sandboxID}", s.handle(s.sandboxes.handleGetSandbox))
	m.HandleFunc("DELETE /sandboxes/{sandboxID}", s.handle(s.sandboxes.handleDeleteSandbox))
	m.HandleFunc("POST /sandboxes/{sandboxID}/timeout", s.handle(s.sandboxes.handleSandboxTimeout))
	m.HandleFunc("POST /v2/sandboxes/{sandboxID}/connect", s.handle(s.sandboxes.handleConnectSandbox))
	m.HandleFunc("POST /sandboxes/{sandboxID}/connect", s.handle(s.sandboxes.handleConnectSandboxV1))
	m.HandleFunc("POST /sandboxes/{sandboxID}/refreshes", s.handle(s.sandboxes.handleRefreshSandbox))
	m.HandleFunc("POST /sandboxes/{sandboxID}/pause", s.handle(s.sandboxes.handlePauseSandbox))
	m.HandleFunc("POST /sandboxes/{sandboxID}/resume", s.handle(s.sandboxes.handleResumeSandbox))
	m.HandleFunc("GET /sandboxes/metrics", s.handle(s.sandboxes.handleSandboxesMetrics))
	m.HandleFunc("GET /sandboxes/{sandboxID}/metrics", s.handle(s.sandboxes.handleSandboxMetrics))
	m.HandleFunc("GET /sandboxes/{sandboxID}/logs", s.handle(s.sandboxes.handleSandboxLogs))
	m.HandleFunc("GET /v2/sandboxes/{sandboxID}/logs", s.handle(s.sandboxes.handleSandboxLogsV2))
	m.HandleFunc("POST /sandboxes/{sandboxID}/snapshots", s.handle(s.sandboxes.handleCreateSnapshot))
	m.HandleFunc("GET /snapshots", s.handle(s.sandboxes.handleListSnapshots))
	return m
}

// handleTemplateAliasOrTags serves GET /templates/aliases/{alias} and
// GET /templates/{id}/tags.
func (s *Server) handleTemplateAliasOrTags(w http.ResponseWriter, r *http.Request) error {
	a, b := r.PathValue("a"), r.PathValue("b")
	switch {
	case a == "aliases":
		return s.templates.handleAlias(w, b)
	case b == "tags":
		return s.templates.handleListTags(w, a)
	default:
		return failure.New(failure.NotFound, "no route for %s %s", r.Method, r.URL.Path)
	}
}

// handleTemplateFileOrNamespacedAlias serves GET /templates/{id}/files/{hash} and an alias
// whose "/" was not escaped: GET /templates/aliases/{namespace}/{alias}.
func (s *Server) handleTemplateFileOrNamespacedAlias(w http.ResponseWriter, r *http.Request) error {
	a, b, c := r.PathValue("a"), r.PathValue("b"), r.PathValue("c")
	switch {
	case a == "aliases":
		return s.templates.handleAlias(w, b+"/"+c)
	case b == "files":
		return s.templates.handleFileLink(w, r, a, c)
	default:
		return failure.New(failure.NotFound, "no route for %s %s", r.Method, r.URL.Path)
	}
}

// LocalStats is the answer of /_local/stats: the store's counts and the
// warm pool's containers ready to be handed out (store.Stats.Pooled counts
// those starting too).
type LocalStats struct {
	store.Stats
	PoolReady int `json:"poolReady"`
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) error {
	st, err := s.stats.Stats()
	if err != nil {
		return failure.OwnFailure(err)
	}
	writeJSON(w, http.StatusOK, LocalStats{Stats: st, PoolReady: s.sandboxes.sandboxes.PoolReady()})
	return nil
}
