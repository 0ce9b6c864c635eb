//go:build linux

// Package server is our envd: the daemon that runs inside every sandbox and
// serves the process and filesystem Connect services plus the plain HTTP
// endpoints (/health, /files, /init, /envs) of envd 0.6.13 (design/e2b-api.md "envd protocol").
package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/filesystem/filesystemconnect"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process/processconnect"
)

// Defaults from envd 0.6.13.
const (
	defaultEndedRetention = 30 * time.Second
	defaultKeepalive      = 90 * time.Second
	fallbackUser          = "root"
	// maxMessageBytes bounds one Connect message; stdin chunks and file
	// listings are far below it.
	maxMessageBytes = 16 << 20
)

// Config configures a Server. The zero value is usable.
type Config struct {
	// DefaultUser runs requests that name no user; /init may change it.
	// Empty means root.
	DefaultUser string
	// DefaultWorkdir is the cwd of processes started without one; /init may
	// change it. Empty means the user's home.
	DefaultWorkdir string
	// EndedRetention is how long Connect can still replay a finished
	// process. Zero means 30 s.
	EndedRetention time.Duration
	// Logger receives process starts and ends and panics recovered from
	// handlers (NewLogger's lines), each with its "logger". Nil means slog's
	// default logger.
	Logger *slog.Logger
	// BaseEnv is set for every process before /init's envVars and the
	// request's own, which override it (e.g. the egress proxy variables).
	BaseEnv map[string]string
	// ReapOrphans makes Serve wait for zombie children the server did not
	// start (orphans re-parented to it as PID 1 or subreaper). Only for a
	// process that runs nothing but envd: it would race other code's
	// exec.Cmd.Wait.
	ReapOrphans bool
}

// Server is an envd daemon. It is an http.Handler.
type Server struct {
	cfg     Config
	logger  *slog.Logger
	handler http.Handler
	procs   *processTable
	// watchers are the CreateWatcher watchers.
	watchers *watcherTable
	cpu      cpuSampler

	mu             sync.Mutex
	accessToken    string
	defaultUser    string
	defaultWorkdir string
	envVars        map[string]string
}

// New returns a Server ready to serve.
func New(cfg Config) *Server {
	if cfg.EndedRetention <= 0 {
		cfg.EndedRetention = defaultEndedRetention
	}
	s := &Server{
		cfg:            cfg,
		defaultUser:    cfg.DefaultUser,
		defaultWorkdir: cfg.DefaultWorkdir,
		envVars:        map[string]string{},
	}
	base := cfg.Logger
	if base == nil {
		base = slog.Default()
	}
	// Named as envd's main.go names its loggers.
	s.logger = base.With("logger", "envd")
	if s.defaultUser == "" {
		s.defaultUser = fallbackUser
	}
	s.procs = newProcessTable(cfg.EndedRetention, base.With("logger", "process"))
	s.watchers = newWatcherTable()

	opts := []connect.HandlerOption{
		connect.WithReadMaxBytes(maxMessageBytes),
		connect.WithRecover(func(_ context.Context, spec connect.Spec, _ http.Header, p any) error {
			s.logger.Error("panic in "+spec.Procedure, "panic", fmt.Sprint(p))
			return connect.NewError(connect.CodeInternal, fmt.Errorf("internal error in %s", spec.Procedure))
		}),
	}
	mux := http.NewServeMux()
	mux.Handle(processconnect.NewProcessHandler(&processService{s: s}, opts...))
	mux.Handle(filesystemconnect.NewFilesystemHandler(&filesystemService{s: s}, opts...))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "") // sent empty, as envd does
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /metrics", s.handleMetrics)
	mux.HandleFunc("GET /files", s.handleDownload)
	mux.HandleFunc("POST /files", s.handleUpload)
	mux.HandleFunc("POST /init", s.handleInit)
	mux.HandleFunc("GET /envs", s.handleEnvs)
	s.handler = envd.CORS.Handler(s.recoverPanics(s.requireToken(requireKnownUser(mux))))
	return s
}

// ServeHTTP serves envd's HTTP endpoints and Connect procedures.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Serve serves HTTP/1.1 on ln until ctx ends, then closes every connection
// and kills the processes still running. It returns nil when ctx ended it.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(s.logger.Handler(), slog.LevelError)}
	if s.cfg.ReapOrphans {
		reapCtx, stopReaping := context.WithCancel(ctx)
		defer stopReaping()
		go s.procs.reapLoop(reapCtx)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			// Streams (Start, Connect) are long-lived: close instead of
			// waiting for them in Shutdown.
			_ = hs.Close()
		case <-done:
		}
	}()
	err := hs.Serve(ln)
	close(done)
	s.Close()
	if ctx.Err() != nil && errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close kills every process the server started that is still running and
// stops the directory watchers.
func (s *Server) Close() {
	s.procs.killAll()
	s.watchers.closeAll()
}

// settings is a consistent snapshot of what /init configures.
type settings struct {
	accessToken    string
	defaultUser    string
	defaultWorkdir string
	envVars        map[string]string
	baseEnv        map[string]string
}

func (s *Server) settings() settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return settings{
		baseEnv:        s.cfg.BaseEnv,
		accessToken:    s.accessToken,
		defaultUser:    s.defaultUser,
		defaultWorkdir: s.defaultWorkdir,
		envVars:        maps.Clone(s.envVars),
	}
}

// sandboxEnv is the sandbox-wide environment every process gets after the
// base variables: Config.BaseEnv, /init's envVars over it, plus
// E2B_SANDBOX=true.
func (st settings) sandboxEnv() map[string]string {
	env := maps.Clone(st.baseEnv)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, st.envVars)
	env["E2B_SANDBOX"] = "true"
	return env
}

const unauthorizedMessage = "unauthorized access, please provide a valid access token or method signing if supported"

// requireToken enforces X-Access-Token once /init set one: on every path but
// GET /health, /files, which accept a token or a signature themselves, and
// POST /init, which takes the token from its body (handleInit).
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/files" || (r.URL.Path == "/health" && r.Method == http.MethodGet) ||
			(r.URL.Path == "/init" && r.Method == http.MethodPost) {
			next.ServeHTTP(w, r)
			return
		}
		if !tokenMatches(s.settings().accessToken, r.Header.Get(envd.HeaderAccessToken)) {
			writeError(w, http.StatusUnauthorized, unauthorizedMessage)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireKnownUser refuses a request whose Authorization: Basic names no
// user, on every path, as envd's authn middleware does: 401 with Connect's
// error JSON, unauthenticated "invalid username: '<u>'".
func requireKnownUser(next http.Handler) http.Handler {
	errW := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name, _, ok := r.BasicAuth(); ok {
			if _, err := lookupUser(name); err != nil {
				_ = errW.Write(w, r, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("invalid username: '%s'", name)))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// tokenMatches reports whether the presented token grants access: always when
// no token is set.
func tokenMatches(want, got string) bool {
	return want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}

// recoverPanics turns a panic in a plain HTTP handler into a 500 so that one
// bad request never takes the daemon down. (Connect handlers recover through
// connect.WithRecover.)
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler { //nolint:errorlint // recover's value, compared as net/http does: the handler panics with the sentinel itself
					panic(p)
				}
				s.logger.Error("panic in "+r.Method+" "+r.URL.Path, "panic", fmt.Sprint(p))
				writeError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// The content types of envd's JSON answers: its error envelope names the
// charset, /envs and /metrics do not, and an upload's answer is what
// net/http sniffs from JSON (envd sets none).
const (
	contentTypeJSON      = "application/json"
	contentTypeErrorJSON = "application/json; charset=utf-8"
	contentTypeUpload    = "text/plain; charset=utf-8"
)

// writeError writes envd's HTTP error envelope.
func writeError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	writeJSON(w, status, contentTypeErrorJSON, map[string]any{"code": status, "message": message})
}

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) handleEnvs(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, contentTypeJSON, s.settings().sandboxEnv())
}

// isRoot reports whether the daemon may switch users and chown.
func isRoot() bool { return os.Geteuid() == 0 }
