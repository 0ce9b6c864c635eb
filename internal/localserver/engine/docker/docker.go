// Package docker runs the local server's template builds and sandboxes as
// containers of a Docker engine with envd inside: the containers, their
// runtime, seccomp profile, limits and disk watchdog, the images and the
// layer cache, and the clean-up after a crash. E2B's build steps are
// package build's, run over this package's containers; the channel to
// each container's envd is package attach's. The server decides what to
// run and records results; this package only knows how to run it.
package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/system"
	docker "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// DockerOptions configures NewDocker.
type DockerOptions struct {
	// EnvdBinaries are static Linux builds of the provider binary, at most
	// one per architecture (read from each file), run in containers as
	// envd: a container gets the build for its image's architecture. An
	// architecture none of them is for gets this executable when it is a
	// Linux build of it, else attach.EnvdBinaryName(arch) beside it. They
	// reach containers through the engine's API (attach.Volumes), never as
	// host paths.
	EnvdBinaries []string
	// Network is "none" (default: a network namespace of its own for every
	// container) or "host". Bridge networks are never used.
	Network string
	// Runtime is the OCI runtime of every sandbox and build container:
	// RuntimeAuto (gVisor when the engine offers one that passes a
	// self-test, else the engine's default with a warning), a runtime's
	// name (an error when the engine lacks it or its self-test fails), or
	// empty: the engine's default, unchecked (runtime.go).
	Runtime string
	// Egress is the way out of containers of network "none": the HTTP(S)
	// proxy offered inside them (CONNECT and absolute-URI requests) and the
	// resolver of their DNS; nil offers neither.
	Egress attach.Gate
	// LabelPrefix namespaces the labels that mark our containers (default
	// "e2b-local").
	LabelPrefix string
	// Instance tells apart servers sharing one engine (e.g. a hash of the
	// data dir); RemoveOrphans touches only containers of this instance
	// (default "default").
	Instance string
	// ImageRepository is the repository build images are committed to
	// (default "e2b-local"); the image is <repo>/<templateID>:<buildID>.
	ImageRepository string
	// LayerCacheSize is how many layer images (one per build phase, see
	// layers.go) are kept for later builds, the most recently used (default
	// engine.DefaultLayerCacheSize; negative: none outlive their build).
	LayerCacheSize int
	// PidsLimit caps the processes (threads included) of every container
	// (default engine.DefaultPidsLimit; negative: no limit).
	PidsLimit int64
	// DiskSizeMB is the disk limit of every sandbox and build container:
	// the most its file system (image and changes) may grow to: hard
	// where the storage driver takes a size (probeDiskQuota), else
	// EnforceDiskLimits stops a container past it (default
	// engine.DefaultDiskSizeMB; negative: none).
	DiskSizeMB int
	// InodesPerSandbox bounds the files (and directories, links, ...) the
	// writable layer of every sandbox and build container may hold: a
	// container past it is stopped (default engine.DefaultInodesPerSandbox;
	// negative: none).
	InodesPerSandbox int64
	// EnvdStartTimeout bounds the wait for envd's /health (default 30 s).
	EnvdStartTimeout time.Duration
	// ReadyTimeout bounds the ready command loop (default 10 min, as on E2B:
	// design/e2b-api.md, "Start and ready commands").
	ReadyTimeout time.Duration
	// ReadyInterval is the pause between ready command runs (default 2 s).
	ReadyInterval time.Duration
	Logger        *slog.Logger
}

// Defaults of DockerOptions.
const (
	defaultLabelPrefix     = "e2b-local"
	defaultImageRepository = "e2b-local"
)

// Docker is the engine backed by a Docker Engine.
type Docker struct {
	cli    *docker.Client
	opts   DockerOptions
	log    *slog.Logger
	labels labels

	// channels are the server's ends of its containers.
	channels *attach.Channels
	// envd holds the envd volume of every architecture containers have
	// needed.
	envd *attach.Volumes
	// seccompOpt hands the engine the seccomp profile (seccomp.go).
	seccompOpt string
	// runtime is the runtime every sandbox and build container runs under,
	// chosen at start (runtime.go).
	runtime engine.Runtime
	// setuid: sandbox and build containers run without no-new-privileges,
	// so that sudo works as on E2B, because root in them is not root of
	// the host (engine.SetuidAllowed).
	setuid bool
	layers *layerStore
	// quota is how the disk limit holds, found at start.
	quota diskQuota
	// watch measures the running containers against their limits.
	watch *fileWatch

	mu sync.Mutex
	// startCmds cancels the streams that keep sandbox start commands
	// attached, by sandbox ID.
	startCmds map[string]context.CancelFunc
	// awaited are the images of deleted templates that wait for the
	// containers running from them to end (RemoveImage).
	awaited *awaitedImages
	// built is set by the first Build: Close then removes the build
	// containers left, which are this server's own (a second server on
	// the same data directory, which fails to open its records, must not
	// remove the first one's).
	built bool
}

// NewDocker connects to the engine named by DOCKER_HOST (or the default
// socket), negotiating the API version so that older engines (API 1.41 of
// Debian's docker.io 20.10) work, and fails when no engine answers.
func NewDocker(ctx context.Context, opts DockerOptions) (*Docker, error) {
	switch opts.Network {
	case "":
		opts.Network = engine.NetworkNone
	case engine.NetworkHost, engine.NetworkNone:
	default:
		return nil, fmt.Errorf("docker runtime: network %q is not supported (use none or host)", opts.Network)
	}
	if opts.Instance == "" {
		opts.Instance = "default"
	}
	if opts.LabelPrefix == "" {
		opts.LabelPrefix = defaultLabelPrefix
	}
	if opts.ImageRepository == "" {
		opts.ImageRepository = defaultImageRepository
	}
	if opts.LayerCacheSize == 0 {
		opts.LayerCacheSize = engine.DefaultLayerCacheSize
	}
	if opts.PidsLimit == 0 {
		opts.PidsLimit = engine.DefaultPidsLimit
	}
	switch {
	case opts.DiskSizeMB == 0:
		opts.DiskSizeMB = engine.DefaultDiskSizeMB
	case opts.DiskSizeMB > math.MaxInt32:
		return nil, fmt.Errorf("docker runtime: a disk size of %d MiB is beyond any disk", opts.DiskSizeMB)
	}
	if opts.InodesPerSandbox == 0 {
		opts.InodesPerSandbox = engine.DefaultInodesPerSandbox
	}
	if opts.EnvdStartTimeout <= 0 {
		opts.EnvdStartTimeout = 30 * time.Second
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 10 * time.Minute
	}
	if opts.ReadyInterval <= 0 {
		opts.ReadyInterval = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}

	cli, err := connect(ctx, "")
	if err != nil {
		return nil, err
	}
	l := labels{prefix: opts.LabelPrefix, instance: opts.Instance}
	d := &Docker{
		cli: cli, opts: opts, log: opts.Logger, labels: l,
		channels:  attach.NewChannels(cli, opts.Egress, opts.Logger),
		layers:    &layerStore{cli: cli, labels: l, repository: opts.ImageRepository, log: opts.Logger},
		startCmds: map[string]context.CancelFunc{}, awaited: newAwaitedImages(cli, opts.Logger),
	}
	if d.seccompOpt, err = seccompOpt(false); err != nil {
		cli.Close()
		return nil, fmt.Errorf("the seccomp profile: %w", err)
	}
	d.envd, err = attach.NewVolumes(ctx, cli, attach.VolumesOptions{
		EnvdBinaries: opts.EnvdBinaries, LabelPrefix: opts.LabelPrefix, Instance: opts.Instance,
		HostConfig: hostConfig(engine.NetworkNone, "", d.seccompOpt, false),
	})
	if err != nil {
		cli.Close()
		return nil, err
	}
	info, err := cli.Info(ctx)
	if err != nil {
		d.Close() //nolint:contextcheck // Close bounds its clean-up with a context of its own
		return nil, fmt.Errorf("docker info: %w", err)
	}
	choice, err := chooseRuntime(ctx, d.opts.Runtime, info.DefaultRuntime, offeredRuntimes(info.Runtimes), d.selfTestRuntime)
	if err != nil {
		d.Close() //nolint:contextcheck // Close bounds its clean-up with a context of its own
		return nil, err
	}
	d.runtime = choice.Runtime
	if d.runtime.GVisor {
		if d.seccompOpt, err = seccompOpt(true); err != nil {
			d.Close() //nolint:contextcheck // Close bounds its clean-up with a context of its own
			return nil, fmt.Errorf("the seccomp profile: %w", err)
		}
	}
	userns, err := userNamespace(info)
	if err != nil {
		d.Close() //nolint:contextcheck // Close bounds its clean-up with a context of its own
		return nil, err
	}
	d.setuid = engine.SetuidAllowed(d.runtime, userns, opts.Network)
	if d.quota, err = d.probeDiskQuota(ctx, info.Driver); err != nil {
		d.Close() //nolint:contextcheck // Close bounds its clean-up with a context of its own
		return nil, err
	}
	d.watch = newFileWatch(cli, l, d.channels, d.log, d.quota.limit == engine.DiskLimitWatchdog)
	if choice.fallback != "" {
		d.log.Warn("containers run under "+choice.Name+" and share this machine's kernel: "+choice.fallback+". Install gVisor (runsc) and register it in the engine for a kernel per sandbox (docs/guides/sandbox-security.md).", "runtime", choice.Name)
	}
	return d, nil
}

// connect opens a client of the engine at dockerHost (empty: DOCKER_HOST,
// else the default socket) that answers.
func connect(ctx context.Context, dockerHost string) (*docker.Client, error) {
	opt := docker.FromEnv
	if dockerHost != "" {
		opt = docker.WithHost(dockerHost)
	}
	cli, err := docker.NewClientWithOpts(opt, docker.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("DOCKER_HOST=%q: %w", cmp.Or(dockerHost, os.Getenv("DOCKER_HOST")), err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pingCtx); err != nil {
		cli.Close()
		return nil, engineUnreachable(cli.DaemonHost(), err)
	}
	return cli, nil
}

// engineUnreachable is the one error for an engine that does not answer:
// where it was looked for, why not, and what to do.
func engineUnreachable(host string, err error) error {
	where := "the default socket " + host
	if env := os.Getenv("DOCKER_HOST"); env != "" {
		where = host + " (DOCKER_HOST)"
	}
	// The client's own message repeats the address: keep only the cause
	// of a failed connection (no such socket, permission denied, refused).
	because := " (" + err.Error() + ")"
	var op *net.OpError
	switch {
	case errors.As(err, &op):
		because = " (" + op.Err.Error() + ")"
	case docker.IsErrConnectionFailed(err):
		because = ""
	}
	return fmt.Errorf("no Docker engine answers at %s%s: start Docker, or set DOCKER_HOST to a running engine (unix:///path/to/docker.sock, tcp://host:port)", where, because)
}

// Close ends the streams attached to sandboxes' start commands (which
// kills those commands), removes the build containers left when it ran
// builds (no build outlives the server: the next start fails those that
// were running) and
// the awaited images no container runs from any more, and releases the
// engine connection. Sandbox containers are left alone: stopping them is
// the caller's decision.
func (d *Docker) Close() error {
	d.mu.Lock()
	for id, cancel := range d.startCmds {
		cancel()
		delete(d.startCmds, id)
	}
	d.mu.Unlock()
	d.channels.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	d.mu.Lock()
	built := d.built
	d.mu.Unlock()
	if built {
		errs = append(errs, removeBuildContainers(ctx, d.cli, d.labels, d.log))
	}
	d.awaited.removeUnused(ctx)
	// The envd volume goes with the server unless a container of it (a kept
	// sandbox) still mounts it: a server whose data directory is deleted
	// then leaves nothing on the engine, and the next start makes it again.
	if d.envd != nil {
		errs = append(errs, d.envd.Remove(ctx, false))
	}
	return errors.Join(append(errs, d.cli.Close())...)
}

// removeBuildContainers removes the build containers of the instance of l.
func removeBuildContainers(ctx context.Context, cli *docker.Client, l labels, log *slog.Logger) error {
	list, err := l.list(ctx, cli, filters.Arg("label", l.key("kind")+"="+kindBuild))
	if err != nil {
		return fmt.Errorf("list build containers: %w", err)
	}
	var errs []error
	for _, c := range list {
		log.Info("removing a build container at shutdown", "container", attach.ShortID(c.ID), "build", c.Labels[l.key("build-id")])
		errs = append(errs, removeContainer(ctx, cli, c.ID))
	}
	return errors.Join(errs...)
}

// Info reports the engine version, the negotiated API version, the runtime
// of the server's containers, the engine's OS and architecture, and the
// envd build of the engine's architecture.
func (d *Docker) Info(ctx context.Context) (engine.EngineInfo, error) {
	info, err := d.cli.Info(ctx)
	if err != nil {
		return engine.EngineInfo{}, fmt.Errorf("docker info: %w", err)
	}
	_, envdBinary, err := d.envd.ForEngine(ctx)
	if err != nil {
		return engine.EngineInfo{}, err
	}
	userns, err := userNamespace(info)
	if err != nil {
		return engine.EngineInfo{}, err
	}
	return engine.EngineInfo{
		ServerVersion: info.ServerVersion,
		APIVersion:    d.cli.ClientVersion(),
		Runtime:       d.runtime,
		OS:            info.OperatingSystem,
		Arch:          info.Architecture,
		EnvdBinary:    envdBinary,
		UserNamespace: userns,
		Setuid:        d.setuid,
		DiskLimit:     d.quota.limit,
	}, nil
}

// userNamespace tells whether the engine runs containers in a user
// namespace of their own (dockerd --userns-remap).
func userNamespace(info system.Info) (bool, error) {
	secOpts, err := system.DecodeSecurityOptions(info.SecurityOptions)
	if err != nil {
		return false, fmt.Errorf("docker info: security options: %w", err)
	}
	return slices.ContainsFunc(secOpts, func(o system.SecurityOpt) bool { return o.Name == "userns" }), nil
}
