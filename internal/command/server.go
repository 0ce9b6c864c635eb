// Package command holds the subcommands of the provider binary other than
// the provider itself: `server` (the local E2B-compatible server) and
// `envd` (the daemon inside its sandboxes). It parses their flags and
// environment, handles signals and chooses exit codes; the servers are
// libraries configured by structs (localserver.Options,
// envd/server.RunOptions).
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/egress"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/sandboxes"
)

// parseServer reads the flags of `server`; every flag can also be set by
// the environment variable E2B_LOCAL_<FLAG> (upper case, "-" → "_").
func parseServer(args []string, stdout io.Writer) (localserver.Options, error) {
	var o localserver.Options
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:3000", "address to listen on (host:port; port 0 picks a free one)")
	fs.StringVar(&o.DataDir, "data-dir", defaultDataDir(), "directory for state, archives and the API key")
	fs.StringVar(&o.APIKey, "api-key", "", "API key clients must send (e2b_ + hex); generated once and kept in the data dir when empty")
	fs.StringVar(&o.TeamSlug, "team-slug", localserver.DefaultTeamSlug, "namespace of template names (<team-slug>/<alias>)")
	var envdBinaries string
	fs.StringVar(&envdBinaries, "envd-binary", "", "comma-separated static linux builds of this binary, at most one per architecture, run in containers as envd: a container gets the build for its image's architecture (default for each architecture: this executable when it is one, else envd_linux_<arch> beside it)")
	fs.StringVar(&o.Network, "network", "none", "container network: none (a network namespace of its own per container: no host loopback, no other sandbox) or host (UNSAFE for untrusted code: the host's network, loopback services included)")
	fs.StringVar(&o.Runtime, "runtime", engine.RuntimeAuto, "OCI runtime of sandbox and build containers: auto (gVisor's runsc when the engine offers it and it passes a self-test at start-up, else the engine's default with a warning) or a runtime of the engine by name, e.g. runsc or runc (an error when missing or failing its self-test)")
	fs.StringVar(&o.Egress, "egress", egress.ModePublic, "outbound access of sandboxes and build steps through the server's HTTP(S) proxy: public (the public internet only: never loopback, private, link-local or other non-public addresses) or none (only --egress-allow)")
	fs.StringVar(&o.EgressAllow, "egress-allow", "", "comma-separated extra egress targets, allowed even when private or loopback: CIDR, IP, ip:port or host:port (the server's own port stays refused)")
	fs.StringVar(&o.DNSUpstream, "dns-upstream", "", "DNS server (ip:port) that resolves names for the egress proxy and for the resolver in every sandbox and build container (127.0.0.1:53 there, under the --egress policy); default: the system's resolver")
	fs.StringVar(&o.Domain, "domain", localserver.DefaultDomain, "domain answered for sandboxes and printed as E2B_DOMAIN, a bare DNS name the provider's domain accepts")
	fs.StringVar(&o.PublicURL, "public-url", "", "base URL clients reach this server at, used in upload URLs (default: the request's Host)")
	fs.Int64Var(&o.MaxUploadBytes, "max-upload-bytes", localserver.DefaultMaxUploadBytes, "largest accepted archive upload")
	fs.Int64Var(&o.MaxUnpackedBytes, "max-unpacked-bytes", localserver.DefaultMaxUnpackedBytes, "largest accepted unpacked archive size")
	fs.IntVar(&o.MaxArchiveEntries, "max-archive-entries", localserver.DefaultMaxArchiveEntries, "most entries an archive may have")
	fs.DurationVar(&o.UploadURLTTL, "upload-url-ttl", localserver.DefaultUploadURLTTL, "lifetime of an upload URL")
	fs.DurationVar(&o.MaxSandboxTimeout, "max-sandbox-timeout", localserver.DefaultMaxSandboxTimeout, "longest sandbox timeout")
	fs.DurationVar(&o.MaxBuildTime, "max-build-time", localserver.DefaultMaxBuildTime, "longest a build may run before it fails (E2B: 1h)")
	fs.IntVar(&o.MaxLogEntries, "max-log-entries", localserver.DefaultMaxLogEntries, "most entries kept of each build's and each sandbox's log: its first and last halves, with a marker entry for what was dropped")
	fs.Int64Var(&o.MaxLogBytes, "max-log-bytes", localserver.DefaultMaxLogBytes, "most bytes of messages kept of each build's and each sandbox's log, split as --max-log-entries is")
	fs.IntVar(&o.MaxCPU, "max-cpu", localserver.DefaultMaxCPUCount, "largest cpuCount of a template")
	fs.IntVar(&o.MaxMemoryMB, "max-memory-mb", localserver.DefaultMaxMemoryMB, "largest memoryMB of a template")
	fs.IntVar(&o.MaxConnections, "max-connections", localserver.DefaultMaxConnections, "most open client connections; when reached, the oldest idle one is closed for a new one")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", localserver.DefaultIdleTimeout, "how long a keep-alive connection may sit idle between requests")
	fs.IntVar(&o.LayerCacheSize, "layer-cache-size", engine.DefaultLayerCacheSize, "most build layer images kept for later builds, the most recently used (-1: none)")
	fs.IntVar(&o.DiskSizeMB, "disk-size-mb", engine.DefaultDiskSizeMB, "disk limit of each sandbox and build container in MiB: the most its files (image included) may grow to; writes past it fail where the engine's storage driver takes a size, else the container is stopped (-1: no limit)")
	fs.Int64Var(&o.InodesPerSandbox, "inodes-per-sandbox", engine.DefaultInodesPerSandbox, "most files, directories and links each sandbox and build container may create or change (its writable layer's entries, as the engine lists them); a container past it is stopped (-1: no limit)")
	fs.Int64Var(&o.PidsLimit, "pids-limit", engine.DefaultPidsLimit, "most processes and threads in one sandbox or build container (-1: no limit)")
	fs.IntVar(&o.Pool.PerBuild, "pool-size-per-build", sandboxes.DefaultPoolSizePerBuild, "started sandbox containers kept ready for each build sandboxes were created from within --pool-idle, handed out on create (0: no warm pool)")
	fs.IntVar(&o.Pool.Max, "pool-max", sandboxes.DefaultPoolMax, "most containers of the warm pool in all")
	fs.DurationVar(&o.Pool.Idle, "pool-idle", sandboxes.DefaultPoolIdle, "how long a pooled container waits to be handed out before it is removed, and how long after its last create a build keeps its pool")
	fs.BoolVar(&o.PruneOnExit, "prune-on-exit", false, "when the server stops, do what server prune does: remove its layer cache and what no record owns from the engine")
	if err := parseFlags(fs, args, serverIntro, stdout); err != nil {
		return o, err
	}
	errs := applyEnv(fs)
	if envdBinaries != "" {
		o.EnvdBinaries = strings.Split(envdBinaries, ",")
	}
	if _, err := egress.NewPolicy(o.Egress, o.EgressAllow); err != nil {
		errs = append(errs, err)
	}
	if err := egress.CheckUpstream(o.DNSUpstream); err != nil {
		errs = append(errs, err)
	}
	if o.Pool.PerBuild < 0 || o.Pool.Max < 0 || o.Pool.Idle < 0 {
		errs = append(errs, fmt.Errorf("--pool-size-per-build %d, --pool-max %d and --pool-idle %s must not be negative", o.Pool.PerBuild, o.Pool.Max, o.Pool.Idle))
	}
	if o.Network != engine.NetworkNone && o.Network != engine.NetworkHost {
		errs = append(errs, fmt.Errorf("--network %q is not one of none, host", o.Network))
	}
	if o.Runtime == "" {
		errs = append(errs, errors.New("--runtime is empty: use auto or a runtime of the Docker engine"))
	}
	return o, errors.Join(errs...)
}

// defaultDataDir is the server's data directory when --data-dir is not given.
func defaultDataDir() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "e2b-local")
	}
	return "e2b-local"
}

// applyEnv sets every flag of fs the command line did not from its
// environment variable E2B_LOCAL_<FLAG> (upper case, "-" → "_").
func applyEnv(fs *flag.FlagSet) []error {
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
	return errs
}

const serverIntro = "Usage: terraform-provider-e2b server [flags]\n" +
	"       terraform-provider-e2b server prune [flags]\n\n" +
	"Runs a local E2B-compatible server: templates build and sandboxes run as Docker containers.\n" +
	"`server prune` removes what a stopped server keeps on the engine (run it with --help).\n" +
	"Every flag can also be set as E2B_LOCAL_<FLAG> (e.g. E2B_LOCAL_DATA_DIR)."

// Server runs the `server` subcommand until SIGINT or SIGTERM and returns
// the exit code: 0 (also for --help), 2 for bad flags, 1 when the server fails.
// `server prune` is serverPrune.
func Server(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "prune" {
		return serverPrune(args[1:], stdout, stderr)
	}
	opts, err := parseServer(args, stdout)
	if err != nil {
		return usageExit(stderr, "server", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := localserver.Run(ctx, opts, logger, stdout); err != nil {
		logger.Error("server failed", "err", err)
		return 1
	}
	return 0
}

const pruneIntro = "Usage: terraform-provider-e2b server prune [flags]\n\n" +
	"Removes from the Docker engine (DOCKER_HOST) what the stopped server of --data-dir keeps there\n" +
	"and none of its records owns, and its whole layer cache: build containers, containers of\n" +
	"sandboxes that ended, images of deleted templates and builds, layer images, the envd volume.\n" +
	"Images of the templates it has and containers of paused sandboxes stay. It prints what it\n" +
	"removed and kept and the space freed. A running server is refused (stop it first); --list\n" +
	"works while it runs. Every flag can also be set as E2B_LOCAL_<FLAG>."

// serverPrune runs `server prune` and returns the exit code: 0 (also for
// --help), 2 for bad flags, 1 when pruning fails or the server runs.
func serverPrune(args []string, stdout, stderr io.Writer) int {
	var o localserver.PruneOptions
	fs := flag.NewFlagSet("server prune", flag.ContinueOnError)
	fs.StringVar(&o.DataDir, "data-dir", defaultDataDir(), "the server's data directory, as given to the server")
	fs.BoolVar(&o.List, "list", false, "list what the server keeps on the engine, with sizes, and remove nothing")
	err := parseFlags(fs, args, pruneIntro, stdout)
	if err == nil {
		err = errors.Join(applyEnv(fs)...)
	}
	if err != nil {
		return usageExit(stderr, "server prune", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := localserver.Prune(ctx, o, stdout, logger); err != nil {
		fmt.Fprintf(stderr, "terraform-provider-e2b server prune: %v\n", err)
		return 1
	}
	return 0
}
