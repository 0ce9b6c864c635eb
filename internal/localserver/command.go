package localserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/egress"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

// apiKeyFile keeps the generated API key between runs.
const apiKeyFile = "api-key"

// commandOptions are the flags of `server`; every flag can also be set by
// the environment variable E2B_LOCAL_<FLAG> (upper case, "-" → "_").
type commandOptions struct {
	listen, dataDir, apiKey, teamSlug, envdBinary, stateDir, network, domain, publicURL string
	egress, egressAllow                                                                 string
	maxUploadBytes, maxUnpackedBytes                                                    int64
	maxArchiveEntries                                                                   int
	uploadURLTTL, maxSandboxTimeout                                                     time.Duration
	maxCPU, maxMemoryMB                                                                 int
	pidsLimit                                                                           int64
	maxConnections                                                                      int
	idleTimeout                                                                         time.Duration
}

func parseCommand(args []string, stderr io.Writer) (commandOptions, error) {
	var o commandOptions
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: terraform-provider-e2b server [flags]\n\nRuns a local E2B-compatible server: templates build and sandboxes run as Docker containers.\nEvery flag can also be set as E2B_LOCAL_<FLAG> (e.g. E2B_LOCAL_DATA_DIR).\n\nFlags:")
		fs.PrintDefaults()
	}
	defaultData := "e2b-local"
	if dir, err := os.UserCacheDir(); err == nil {
		defaultData = filepath.Join(dir, "e2b-local")
	}
	fs.StringVar(&o.listen, "listen", "127.0.0.1:3000", "address to listen on (host:port; port 0 picks a free one)")
	fs.StringVar(&o.dataDir, "data-dir", defaultData, "directory for state, archives and the API key")
	fs.StringVar(&o.apiKey, "api-key", "", "API key clients must send (e2b_ + hex); generated once and kept in the data dir when empty")
	fs.StringVar(&o.teamSlug, "team-slug", DefaultTeamSlug, "namespace of template names (<team-slug>/<alias>)")
	fs.StringVar(&o.envdBinary, "envd-binary", "", "static Linux build of this binary, mounted into containers as envd (default: this executable)")
	fs.StringVar(&o.stateDir, "state-dir", "", "short directory for the per-container relay and egress sockets, stable across restarts (default: <data-dir>/run, or a temp dir when that path is too long)")
	fs.StringVar(&o.network, "network", "none", "container network: none (a network namespace of its own per container: no host loopback, no other sandbox) or host (UNSAFE for untrusted code: the host's network, loopback services included)")
	fs.StringVar(&o.egress, "egress", egress.ModePublic, "outbound access of sandboxes and build steps through the server's HTTP(S) proxy: public (the public internet only: never loopback, private, link-local or other non-public addresses) or none (only --egress-allow)")
	fs.StringVar(&o.egressAllow, "egress-allow", "", "comma-separated extra egress targets, allowed even when private or loopback: CIDR, IP, ip:port or host:port (the server's own port stays refused)")
	fs.StringVar(&o.domain, "domain", "", "domain answered for sandboxes (default: localhost:<port>)")
	fs.StringVar(&o.publicURL, "public-url", "", "base URL clients reach this server at, used in upload URLs (default: the request's Host)")
	fs.Int64Var(&o.maxUploadBytes, "max-upload-bytes", DefaultMaxUploadBytes, "largest accepted archive upload")
	fs.Int64Var(&o.maxUnpackedBytes, "max-unpacked-bytes", DefaultMaxUnpackedBytes, "largest accepted unpacked archive size")
	fs.IntVar(&o.maxArchiveEntries, "max-archive-entries", DefaultMaxArchiveEntries, "most entries an archive may have")
	fs.DurationVar(&o.uploadURLTTL, "upload-url-ttl", DefaultUploadURLTTL, "lifetime of an upload URL")
	fs.DurationVar(&o.maxSandboxTimeout, "max-sandbox-timeout", DefaultMaxSandboxTimeout, "longest sandbox timeout")
	fs.IntVar(&o.maxCPU, "max-cpu", DefaultMaxCPUCount, "largest cpuCount of a template")
	fs.IntVar(&o.maxMemoryMB, "max-memory-mb", DefaultMaxMemoryMB, "largest memoryMB of a template")
	fs.IntVar(&o.maxConnections, "max-connections", DefaultMaxConnections, "most open client connections; when reached, the oldest idle one is closed for a new one")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", DefaultIdleTimeout, "how long a keep-alive connection may sit idle between requests")
	fs.Int64Var(&o.pidsLimit, "pids-limit", engine.DefaultPidsLimit, "most processes and threads in one sandbox or build container (-1: no limit)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := "E2B_LOCAL_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && !set[f.Name] {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", env, v, err))
			}
		}
	})
	if _, err := egress.NewPolicy(o.egress, o.egressAllow); err != nil {
		errs = append(errs, err)
	}
	if o.network != engine.NetworkNone && o.network != engine.NetworkHost {
		errs = append(errs, fmt.Errorf("--network %q is not one of none, host", o.network))
	}
	return o, errors.Join(errs...)
}

// Main runs the `server` subcommand until SIGINT or SIGTERM and returns the
// exit code.
func Main(args []string) int {
	opts, err := parseCommand(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runCommand(ctx, opts, logger, os.Stdout); err != nil {
		logger.Error("server failed", "err", err)
		return 1
	}
	return 0
}

func runCommand(ctx context.Context, o commandOptions, logger *slog.Logger, stdout io.Writer) error {
	dataDir, err := filepath.Abs(o.dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	apiKey, err := loadAPIKey(dataDir, o.apiKey)
	if err != nil {
		return err
	}
	envd := o.envdBinary
	if envd == "" {
		if envd, err = os.Executable(); err != nil {
			return fmt.Errorf("find this executable to mount as envd (set --envd-binary): %w", err)
		}
	}
	stateDir := o.stateDir
	if stateDir == "" {
		stateDir = filepath.Join(dataDir, "run")
		if len(stateDir) > 60 {
			sum := sha256.Sum256([]byte(dataDir))
			stateDir = filepath.Join(os.TempDir(), "e2b-local-"+hex.EncodeToString(sum[:4]))
		}
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	policy, err := egress.NewPolicy(o.egress, o.egressAllow)
	if err != nil {
		return err
	}
	dockerOpts := engine.DockerOptions{
		EnvdBinary: envd, StateDir: stateDir, Network: o.network, PidsLimit: o.pidsLimit,
		Instance: hex.EncodeToString(sha256Prefix(dataDir)), Logger: logger,
	}
	var proxy *egress.Proxy
	if o.network != engine.NetworkHost {
		proxy = egress.New(policy, logger)
		defer proxy.Close()
		dockerOpts.Egress = proxy
	}
	docker, err := engine.NewDocker(ctx, dockerOpts)
	if err != nil {
		return fmt.Errorf("no usable Docker engine (DOCKER_HOST=%q): %w", os.Getenv("DOCKER_HOST"), err)
	}
	defer docker.Close()
	info, err := docker.Info(ctx)
	if err != nil {
		return fmt.Errorf("no Docker engine answers (DOCKER_HOST=%q): %w", os.Getenv("DOCKER_HOST"), err)
	}
	if o.network == engine.NetworkHost {
		logger.Warn("containers share the host's network (--network host): sandbox code reaches every loopback service of this machine, this server's API included, and its listeners appear on the host; egress is not filtered. Do not run untrusted code this way.")
	}
	logger.Info("doctor", "engine", info.ServerVersion, "api", info.APIVersion, "runtime", info.Runtime, "os", info.OS,
		"data_dir", dataDir, "state_dir", stateDir, "network", o.network, "egress", egressSummary(o.network, policy), "envd_binary", envd)
	return serve(ctx, o, dataDir, apiKey, docker, policy, logger, stdout)
}

func sha256Prefix(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:6]
}

func egressSummary(network string, policy *egress.Policy) string {
	if network == engine.NetworkHost {
		return "unfiltered (host network)"
	}
	return policy.String()
}

// serve runs the server on engine until ctx ends. The egress policy, when
// given, learns the listener so that sandboxes never reach it.
func serve(ctx context.Context, o commandOptions, dataDir, apiKey string, eng engine.Engine, policy *egress.Policy, logger *slog.Logger, stdout io.Writer) error {
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	defer ln.Close()
	if policy != nil {
		policy.DenyListener(ln.Addr())
	}
	addr := ln.Addr().(*net.TCPAddr) //nolint:forcetypeassert // a "tcp" listener's address is always a *net.TCPAddr
	baseURL := "http://" + addr.String()
	domain := o.domain
	if domain == "" {
		domain = fmt.Sprintf("localhost:%d", addr.Port)
	}
	srv, err := New(ctx, Config{
		DataDir: dataDir, APIKey: apiKey, TeamSlug: o.teamSlug, PublicURL: o.publicURL, Domain: domain,
		MaxUploadBytes: o.maxUploadBytes, MaxUnpackedBytes: o.maxUnpackedBytes, MaxArchiveEntries: o.maxArchiveEntries,
		UploadURLTTL: o.uploadURLTTL, MaxSandboxTimeout: o.maxSandboxTimeout,
		MaxCPUCount: int32(o.maxCPU), MaxMemoryMB: int32(o.maxMemoryMB), Logger: logger, //nolint:gosec // flag values beyond int32 wrap as before; no host has 2^31 CPUs or MiB
	}, eng)
	if err != nil {
		return err
	}
	maxConns := o.maxConnections
	if maxConns <= 0 {
		maxConns = DefaultMaxConnections
	}
	idle := o.idleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	limited := newConnLimiter(ln, maxConns)
	// No ReadTimeout: request bodies get their deadline from the handler
	// (boundBody), since sandbox streams and uploads need other bounds.
	httpServer := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: min(DefaultReadHeaderTimeout, idle),
		IdleTimeout:       idle,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
		ConnState:         limited.connState,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- httpServer.Serve(limited) }()

	info := Info{APIURL: baseURL, SandboxURL: baseURL, Domain: domain, APIKey: apiKey, PID: os.Getpid(), DataDir: dataDir}
	infoPath := filepath.Join(dataDir, InfoFile)
	if err := writeFileAtomic(infoPath, info); err != nil {
		logger.Error("write server info", "path", infoPath, "err", err)
	}
	fmt.Fprintf(stdout, "E2B_API_URL=%s\nE2B_SANDBOX_URL=%s\nE2B_DOMAIN=%s\nE2B_API_KEY=%s\n", info.APIURL, info.SandboxURL, info.Domain, info.APIKey)
	logger.Info("local E2B server ready", "api_url", info.APIURL, "sandbox_url", info.SandboxURL, "info_file", infoPath)

	var serveErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case serveErr = <-served:
	}
	os.Remove(infoPath)
	// ctx has ended: the shutdown gets bounds of its own.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	if err := httpServer.Shutdown(shutdownCtx); err != nil {
		// Streams to sandboxes do not end by themselves; cut them.
		httpServer.Close()
	}
	cancel()
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	if err := srv.Close(closeCtx); err != nil {
		return errors.Join(serveErr, fmt.Errorf("shut down: %w", err))
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// loadAPIKey returns the configured key, else the one kept in the data dir,
// else a new one that it keeps there.
func loadAPIKey(dataDir, configured string) (string, error) {
	if configured != "" {
		if !e2bapi.IsAPIKey(configured) {
			return "", fmt.Errorf("API key %q must be e2b_ followed by lower-case hex digits", configured)
		}
		return configured, nil
	}
	path := filepath.Join(dataDir, apiKeyFile)
	if raw, err := os.ReadFile(path); err == nil {
		key := strings.TrimSpace(string(raw))
		if !e2bapi.IsAPIKey(key) {
			return "", fmt.Errorf("API key file %s does not hold an e2b_ key; remove it to generate a new one", path)
		}
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	secret := make([]byte, 20)
	_, _ = rand.Read(secret) // crypto/rand.Read never fails (Go 1.24+)
	key := "e2b_" + hex.EncodeToString(secret)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("keep the API key: %w", err)
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		f.Close()
		return "", err
	}
	return key, f.Close()
}

func writeFileAtomic(path string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(raw, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
