package localserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/egress"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/docker"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/sandboxes"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// apiKeyFile keeps the generated API key between runs.
const apiKeyFile = "api-key"

// Options configure Run: the settings of the `server` command (its flags,
// internal/command). Zero limits take the defaults of Config.
type Options struct {
	// Listen is the address to listen on (host:port; port 0 picks a free one).
	Listen string
	// DataDir holds state, archives and the API key.
	DataDir string
	// APIKey is the key clients must send; when empty one is generated once
	// and kept in DataDir.
	APIKey   string
	TeamSlug string
	// EnvdBinaries are Linux builds of this binary, one per architecture,
	// run in containers as envd (docker.DockerOptions.EnvdBinaries).
	EnvdBinaries []string
	// Network is engine.NetworkNone or engine.NetworkHost.
	Network string
	// Runtime is the OCI runtime of sandbox and build containers:
	// engine.RuntimeAuto, a runtime's name, or empty for the engine's
	// default (docker.DockerOptions.Runtime).
	Runtime string
	// Domain is answered for sandboxes and printed as E2B_DOMAIN (default: DefaultDomain).
	Domain    string
	PublicURL string
	// Egress and EgressAllow are the egress policy (egress.NewPolicy).
	Egress, EgressAllow string
	// DNSUpstream is the DNS server (ip:port) the egress proxy and the
	// sandboxes' resolver ask; empty: the system's resolver
	// (egress.UpstreamResolver).
	DNSUpstream string

	MaxUploadBytes, MaxUnpackedBytes int64
	MaxArchiveEntries                int
	UploadURLTTL, MaxSandboxTimeout  time.Duration
	MaxBuildTime                     time.Duration
	MaxLogEntries                    int
	MaxLogBytes                      int64
	MaxCPU, MaxMemoryMB              int
	PidsLimit                        int64
	// DiskSizeMB is every sandbox's and build's disk limit
	// (docker.DockerOptions.DiskSizeMB).
	DiskSizeMB int
	// InodesPerSandbox is every sandbox's and build's file limit
	// (docker.DockerOptions.InodesPerSandbox).
	InodesPerSandbox int64
	LayerCacheSize   int
	MaxConnections   int
	IdleTimeout      time.Duration
	// Pool bounds the warm pool as given (PerBuild 0: off); the command's
	// flags default to DefaultPoolSizePerBuild, DefaultPoolMax and
	// DefaultPoolIdle.
	Pool sandboxes.PoolConfig
	// PruneOnExit runs Prune when the server has stopped: its layer cache
	// and whatever no record owns go with it.
	PruneOnExit bool
}

// Run starts the server as o says on the Docker engine and serves until
// ctx ends: it prepares the data directory and the API key,
// connects to Docker, logs what it found, and prints the server's Info to
// stdout once it listens.
func Run(ctx context.Context, o Options, logger *slog.Logger, stdout io.Writer) (err error) {
	// Bound first: a server that cannot listen (a port in use) writes nothing,
	// neither the data directory nor the API key.
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Listen, err)
	}
	defer ln.Close()
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return err
	}
	if o.PruneOnExit {
		// Deferred before the engine and the records are, so that it runs
		// after they are closed.
		defer func() {
			pruneCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
			defer cancel()
			logger.Info("pruning the engine (--prune-on-exit)")
			err = errors.Join(err, Prune(pruneCtx, PruneOptions{DataDir: dataDir}, stdout, logger))
		}()
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	apiKey, err := loadAPIKey(dataDir, o.APIKey)
	if err != nil {
		return err
	}
	policy, err := egress.NewPolicy(o.Egress, o.EgressAllow)
	if err != nil {
		return err
	}
	dockerOpts := docker.DockerOptions{
		EnvdBinaries: o.EnvdBinaries, Network: o.Network, Runtime: o.Runtime, PidsLimit: o.PidsLimit, DiskSizeMB: o.DiskSizeMB,
		InodesPerSandbox: o.InodesPerSandbox, LayerCacheSize: o.LayerCacheSize,
		Instance: InstanceOf(dataDir), Logger: logger,
	}
	var proxy *egress.Proxy
	if o.Network != engine.NetworkHost {
		proxy = egress.New(policy, egress.UpstreamResolver(o.DNSUpstream), logger)
		defer proxy.Close()
		dockerOpts.Egress = proxy
	}
	dockerEngine, err := docker.NewDocker(ctx, dockerOpts)
	if err != nil {
		return err
	}
	defer dockerEngine.Close() //nolint:contextcheck // ctx has ended by then (the shutdown): Close bounds its clean-up with a context of its own
	info, err := dockerEngine.Info(ctx)
	if err != nil {
		return fmt.Errorf("no Docker engine answers (DOCKER_HOST=%q): %w", os.Getenv("DOCKER_HOST"), err)
	}
	if o.Network == engine.NetworkHost {
		logger.Warn("containers share the host's network (--network host): sandbox code reaches every loopback service of this machine, this server's API included, and its listeners appear on the host; egress is not filtered. Do not run untrusted code this way.")
	}
	for _, warning := range []string{hostRootWarning(info), sudoWarning(info)} {
		if warning != "" {
			logger.Warn(warning)
		}
	}
	logger.Info("doctor", "engine", info.ServerVersion, "api", info.APIVersion, "runtime", info.Runtime.Name, "gvisor", info.Runtime.GVisor, "os", info.OS, "arch", info.Arch,
		"user_namespace", info.UserNamespace, "sudo", info.Setuid, "data_dir", dataDir, "network", o.Network, "egress", egressSummary(o.Network, policy),
		"envd_binary", info.EnvdBinary, "disk_limit", info.DiskLimit)
	return serve(ctx, ln, o, dataDir, apiKey, dockerEngine, info.Runtime, policy, logger, stdout)
}

// InstanceOf is the engine instance of the server with the (absolute)
// dataDir: what its containers and images are labelled with.
func InstanceOf(dataDir string) string {
	sum := sha256.Sum256([]byte(dataDir))
	return hex.EncodeToString(sum[:6])
}

func egressSummary(network string, policy *egress.Policy) string {
	if network == engine.NetworkHost {
		return "unfiltered (host network)"
	}
	return policy.String()
}

// serve runs the server on engine, answering on ln, until ctx ends. The egress
// policy, when given, learns the listener so that sandboxes never reach it.
func serve(ctx context.Context, ln net.Listener, o Options, dataDir, apiKey string, eng Engine, runtime engine.Runtime, policy *egress.Policy, logger *slog.Logger, stdout io.Writer) error {
	if policy != nil {
		policy.DenyListener(ln.Addr())
	}
	addr := ln.Addr().(*net.TCPAddr) //nolint:forcetypeassert // a "tcp" listener's address is always a *net.TCPAddr
	baseURL := "http://" + addr.String()
	domain := o.Domain
	if domain == "" {
		domain = DefaultDomain
	}
	srv, err := New(ctx, Config{
		DataDir: dataDir, APIKey: apiKey, TeamSlug: o.TeamSlug, PublicURL: o.PublicURL, Domain: domain,
		MaxUploadBytes: o.MaxUploadBytes, MaxUnpackedBytes: o.MaxUnpackedBytes, MaxArchiveEntries: o.MaxArchiveEntries,
		UploadURLTTL: o.UploadURLTTL, MaxSandboxTimeout: o.MaxSandboxTimeout, MaxBuildTime: o.MaxBuildTime,
		LogBound:    store.LogBound{MaxEntries: o.MaxLogEntries, MaxBytes: o.MaxLogBytes},
		MaxCPUCount: int32(o.MaxCPU), MaxMemoryMB: int32(o.MaxMemoryMB), Logger: logger, //nolint:gosec // flag values beyond int32 wrap as before; no host has 2^31 CPUs or MiB
		Pool: o.Pool,
	}, eng)
	if err != nil {
		return err
	}
	maxConns := o.MaxConnections
	if maxConns <= 0 {
		maxConns = DefaultMaxConnections
	}
	idle := o.IdleTimeout
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

	info := Info{APIURL: baseURL, SandboxURL: baseURL, Domain: domain, APIKey: apiKey, PID: os.Getpid(), DataDir: dataDir, Runtime: runtime.Name, GVisor: runtime.GVisor}
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
		if !e2b.IsAPIKey(configured) {
			return "", fmt.Errorf("API key %q must be e2b_ followed by lower-case hex digits", configured)
		}
		return configured, nil
	}
	path := filepath.Join(dataDir, apiKeyFile)
	if raw, err := os.ReadFile(path); err == nil {
		key := strings.TrimSpace(string(raw))
		if !e2b.IsAPIKey(key) {
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
