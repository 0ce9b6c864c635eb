package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	docker "github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

// DockerOptions configures NewDocker.
type DockerOptions struct {
	// EnvdBinary is the path of a static Linux build of the provider
	// binary for the engine's architecture; empty: found by EnvdBinaryFor.
	// It reaches containers through the engine's API (envdimage.go), never
	// as a host path.
	EnvdBinary string
	// Network is "none" (default: a network namespace of its own for every
	// container) or "host". Bridge networks are never used.
	Network string
	// Egress serves the HTTP(S) proxy offered inside containers of network
	// "none" (CONNECT and absolute-URI requests); nil offers none.
	Egress http.Handler
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
	// DefaultLayerCacheSize; negative: none outlive their build).
	LayerCacheSize int
	// PidsLimit caps the processes (threads included) of every container
	// (default 4096; negative: no limit).
	PidsLimit int64
	// EnvdStartTimeout bounds the wait for envd's /health (default 30 s).
	EnvdStartTimeout time.Duration
	// ReadyTimeout bounds the ready command loop (default 10 min, as on E2B:
	// design/e2b-api.md, "Start and ready commands").
	ReadyTimeout time.Duration
	// ReadyInterval is the pause between ready command runs (default 2 s).
	ReadyInterval time.Duration
	Logger        *slog.Logger
}

// Paths inside every container.
const (
	// containerEnvdDir is the envd volume (envdimage.go), mounted
	// read-only: nothing in the container can replace envd.
	containerEnvdDir  = "/.e2b"
	containerEnvdPath = containerEnvdDir + "/envd"
	// containerRunDir is a tmpfs only root may enter, where the channel
	// agent keeps the egress socket and the sandbox's end for envd. Not
	// committed with the container's files.
	containerRunDir   = "/run/e2b"
	egressSocketPath  = containerRunDir + "/egress.sock"
	deadlineFilePath  = containerRunDir + "/deadline"
	hostNetEnvdSocket = containerRunDir + "/envd.sock"
)

// Defaults of DockerOptions.
const (
	defaultLabelPrefix     = "e2b-local"
	defaultImageRepository = "e2b-local"
)

// Network modes.
const (
	NetworkNone = "none"
	NetworkHost = "host"
)

// Kinds of containers, the value of the <prefix>.kind label. Build images
// carry kindImage and the layer cache's images kindLayer, which containers
// we create override.
const (
	kindBuild   = "build"
	kindSandbox = "sandbox"
	kindImage   = "image"
	kindLayer   = "layer"
)

// Docker is the Engine backed by a Docker Engine.
type Docker struct {
	cli  *docker.Client
	opts DockerOptions
	log  *slog.Logger

	// egress serves opts.Egress on the egress streams of every channel.
	egress *http.Server
	// envdVolume is the container holding the envd volume that every
	// container mounts read-only (envdimage.go).
	envdVolume string

	mu sync.Mutex
	// startCmds cancels the streams that keep sandbox start commands
	// attached, by sandbox ID.
	startCmds map[string]context.CancelFunc
	// attached holds the channel of every container this server runs, by
	// attachKey.
	attached map[string]*attachment

	// pruneMu serialises PruneLayers.
	pruneMu sync.Mutex
}

// NewDocker connects to the engine named by DOCKER_HOST (or the default
// socket), negotiating the API version so that older engines (API 1.41 of
// Debian's docker.io 20.10) work, and fails when no engine answers.
func NewDocker(ctx context.Context, opts DockerOptions) (*Docker, error) {
	switch opts.Network {
	case "":
		opts.Network = NetworkNone
	case NetworkHost, NetworkNone:
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
		opts.LayerCacheSize = DefaultLayerCacheSize
	}
	if opts.PidsLimit == 0 {
		opts.PidsLimit = DefaultPidsLimit
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

	cli, err := docker.NewClientWithOpts(docker.FromEnv, docker.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("DOCKER_HOST=%q: %w", os.Getenv("DOCKER_HOST"), err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pingCtx); err != nil {
		cli.Close()
		return nil, engineUnreachable(cli.DaemonHost(), err)
	}
	d := &Docker{cli: cli, opts: opts, log: opts.Logger, startCmds: map[string]context.CancelFunc{}, attached: map[string]*attachment{}}
	if d.envdVolume, err = d.ensureEnvdVolume(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	if opts.Egress != nil {
		d.egress = &http.Server{
			Handler:           opts.Egress,
			ReadHeaderTimeout: 30 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug),
		}
	}
	return d, nil
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
// kills those commands) and releases the engine connection. Containers
// are left alone: stopping them is the caller's decision.
func (d *Docker) Close() error {
	d.mu.Lock()
	for id, cancel := range d.startCmds {
		cancel()
		delete(d.startCmds, id)
	}
	atts := d.attached
	d.attached = map[string]*attachment{}
	d.mu.Unlock()
	for _, a := range atts {
		a.close()
	}
	if d.egress != nil {
		d.egress.Close()
	}
	return d.cli.Close()
}

// Info reports the engine version, the negotiated API version, the default
// runtime, the engine's OS and architecture, and the envd build in use.
func (d *Docker) Info(ctx context.Context) (EngineInfo, error) {
	info, err := d.cli.Info(ctx)
	if err != nil {
		return EngineInfo{}, fmt.Errorf("docker info: %w", err)
	}
	return EngineInfo{
		ServerVersion: info.ServerVersion,
		APIVersion:    d.cli.ClientVersion(),
		Runtime:       info.DefaultRuntime,
		OS:            info.OperatingSystem,
		Arch:          info.Architecture,
		EnvdBinary:    d.opts.EnvdBinary,
	}, nil
}

func (d *Docker) label(name string) string { return d.opts.LabelPrefix + "." + name }

// labels marks a container as ours: its kind and the IDs it belongs to.
func (d *Docker) labels(kind, templateID, buildID, sandboxID string) map[string]string {
	l := map[string]string{
		d.label("instance"):    d.opts.Instance,
		d.label("kind"):        kind,
		d.label("template-id"): templateID,
		d.label("build-id"):    buildID,
	}
	if sandboxID != "" {
		l[d.label("sandbox-id")] = sandboxID
	}
	return l
}

// containerRequest is what differs between build and sandbox containers.
type containerRequest struct {
	image    string
	kind     string
	id       string // build or sandbox ID, names its attachment
	token    string // envd access token; empty leaves envd open
	labels   map[string]string
	cpuCount int32
	memoryMB int32
	// end, when set, is when envd ends the container (a sandbox's end).
	end time.Time
}

// runningContainer is a started container with envd answering.
type runningContainer struct {
	id   string
	kind string
	key  string // attachKey of its channel
	envd *client.Client
	// token is the access token envd's Init is given, the one envd sends.
	token string
}

// envdCommand is the container's entrypoint: envd on TCP 49983 of the
// container's own network namespace (as on E2B), reached by the server
// only through the container's channel, and offering the egress proxy
// when there is one. With host networking it listens on a socket of the
// container's own file system instead, so that containers do not fight
// over the host's port 49983. The channel agent is started with the same
// flags and --channel.
func (d *Docker) envdCommand(network string) []string {
	var cmd []string
	if network == NetworkHost {
		cmd = []string{containerEnvdPath, "envd", "--listen", "unix://" + hostNetEnvdSocket}
	} else {
		cmd = []string{containerEnvdPath, "envd", "--listen", fmt.Sprintf("0.0.0.0:%d", envd.Port)}
		if d.egress != nil {
			cmd = append(cmd, "--egress", "unix://"+egressSocketPath, "--egress-listen", fmt.Sprintf("127.0.0.1:%d", envd.EgressProxyPort))
		}
	}
	return append(cmd, "--deadline-file", deadlineFilePath)
}

// SetSandboxDeadline moves the end of the sandbox's container: envd stops
// it then, with or without the server. A zero end clears it.
func (d *Docker) SetSandboxDeadline(ctx context.Context, sandboxID string, end time.Time) error {
	a := d.attachment(attachKey(kindSandbox, sandboxID))
	if a == nil {
		return fmt.Errorf("sandbox %s is not running on this server", sandboxID)
	}
	if err := d.setEnd(ctx, a, end); err != nil {
		return fmt.Errorf("set the end of sandbox %s: %w", sandboxID, err)
	}
	return nil
}

// startContainer creates and starts a container running envd, with envd
// from the envd volume and nothing of the host mounted, waits for envd's
// health through the container's channel and returns. On error nothing is
// left behind.
func (d *Docker) startContainer(ctx context.Context, req containerRequest, prepare func(ctx context.Context, containerID string) error) (*runningContainer, error) {
	key := attachKey(req.kind, req.id)
	labels := maps.Clone(req.labels)
	labels[d.label("network")] = d.opts.Network
	cfg := &container.Config{
		Image: req.image,
		// envd must run as root to run processes as any user.
		User:       "0:0",
		Entrypoint: d.envdCommand(d.opts.Network),
		Labels:     labels,
	}
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(d.opts.Network),
		// The engine's own volume and a tmpfs: no host path, so that any
		// engine works, local or not.
		VolumesFrom: []string{d.envdVolume + ":ro"},
		Tmpfs:       map[string]string{containerRunDir: "mode=0700,size=1m"},
		Resources:   resources(req.cpuCount, req.memoryMB, d.opts.PidsLimit),
		Init:        boolPtr(true),
		// Docker's default set minus NET_RAW (raw and packet sockets) and
		// MKNOD; named one by one so that a changed engine default cannot
		// widen it.
		CapDrop: []string{"ALL"},
		CapAdd:  containerCaps,
		// setuid binaries and file capabilities gain nothing: processes
		// keep at most what envd gave them.
		SecurityOpt: []string{"no-new-privileges"},
	}
	// Not on ctx: a cancel that lands while the engine creates the
	// container would leave one that nothing records. The cancel is seen
	// just after, and the container removed.
	createCtx, cancelCreate := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	created, err := d.cli.ContainerCreate(createCtx, cfg, hc, nil, nil, "")
	cancelCreate()
	if err != nil {
		return nil, fmt.Errorf("create container from %s: %w", req.image, err)
	}
	att := d.attach(key, created.ID, d.opts.Network)
	if !req.end.IsZero() {
		att.end, att.endSet = req.end, true
	}
	rc := &runningContainer{id: created.ID, kind: req.kind, key: key}
	fail := func(err error) (*runningContainer, error) {
		d.discard(ctx, rc)
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if prepare != nil {
		if err := prepare(ctx, created.ID); err != nil {
			return fail(err)
		}
	}
	if err := d.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return fail(fmt.Errorf("start container from %s: %w", req.image, err))
	}
	rc.envd, rc.token = newEnvdClient(d.dialer(att, envd.Port), req.token), req.token
	if err := d.waitEnvd(ctx, created.ID, rc.envd); err != nil {
		return fail(err)
	}
	return rc, nil
}

// waitEnvd polls envd's /health until it answers, the container exits, or
// the start timeout passes.
func (d *Docker) waitEnvd(ctx context.Context, containerID string, conn *client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, d.opts.EnvdStartTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for polls := 0; ; polls++ {
		// A dial opens the channel when there is none: bound each poll.
		pollCtx, pollCancel := context.WithTimeout(ctx, time.Second)
		err := conn.Health(pollCtx)
		pollCancel()
		if err == nil {
			return nil
		}
		// Every second, see whether the container died instead of starting.
		if polls%20 == 19 {
			if insp, ierr := d.cli.ContainerInspect(ctx, containerID); ierr == nil && insp.State != nil && !insp.State.Running {
				return fmt.Errorf("envd did not start: container exited with code %d: %s", insp.State.ExitCode, d.logsTail(ctx, containerID))
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("envd did not answer through the container's channel within %s: %v; container output: %s", d.opts.EnvdStartTimeout, err, d.logsTail(ctx, containerID))
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// logsTail returns the last lines a container wrote, for error messages.
func (d *Docker) logsTail(ctx context.Context, containerID string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	rc, err := d.cli.ContainerLogs(ctx, containerID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if err != nil {
		return "(no logs: " + err.Error() + ")"
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 64<<10)); err != nil && out.Len() == 0 {
		return "(no logs: " + err.Error() + ")"
	}
	return strings.TrimSpace(out.String())
}

// removeContainer force-removes a container. It is not cancelled with ctx:
// cleanup must happen even when the caller's context was cancelled.
func (d *Docker) removeContainer(ctx context.Context, containerID string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	err := d.cli.ContainerRemove(ctx, containerID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if isNotFound(err) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("remove container %s: %w", shortID(containerID), err)
	}
	return err
}

// discard removes a container that failed to start or has served its
// purpose, and its channel. A failure is logged, not returned: the
// caller's own outcome stands, and RemoveOrphans removes the container at
// the next start.
func (d *Docker) discard(ctx context.Context, rc *runningContainer) {
	d.detach(rc.key)
	if err := d.removeContainer(ctx, rc.id); err != nil {
		d.log.Warn("container left behind", "container", shortID(rc.id), "error", err)
	}
}

// DefaultPidsLimit is the default cap on a container's processes.
const DefaultPidsLimit = 4096

// containerCaps are the capabilities of sandbox and build containers:
// what package managers (apt drops to _apt: SETUID, SETGID), useradd,
// chown and chmod (CHOWN, DAC_OVERRIDE, FOWNER, FSETID) and common
// daemons (NET_BIND_SERVICE, SYS_CHROOT for sshd, AUDIT_WRITE for sudo
// and login) need. NET_RAW and MKNOD of Docker's default set are left out.
var containerCaps = []string{
	"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "SETFCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "AUDIT_WRITE",
}

// resources turns the template's CPU and memory into container limits,
// capping CPUs at what the host has so that small machines can run any
// template. Memory has no swap beyond it.
func resources(cpuCount, memoryMB int32, pidsLimit int64) container.Resources {
	var r container.Resources
	if cpuCount > 0 {
		cpus := min(int(cpuCount), runtime.NumCPU())
		r.NanoCPUs = int64(cpus) * 1e9
	}
	if memoryMB > 0 {
		r.Memory = int64(memoryMB) << 20
		r.MemorySwap = r.Memory
	}
	if pidsLimit > 0 {
		r.PidsLimit = &pidsLimit
	}
	return r
}

func boolPtr(b bool) *bool { return &b }

func isNotFound(err error) bool { return err != nil && cerrdefs.IsNotFound(err) }

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// ensureImage makes sure ref exists locally, pulling it when allowed.
func (d *Docker) ensureImage(ctx context.Context, spec BuildSpec, logf func(string, ...any)) (image.InspectResponse, error) {
	insp, err := d.cli.ImageInspect(ctx, spec.BaseImage)
	if err == nil {
		return insp, nil
	}
	if !isNotFound(err) {
		return insp, fmt.Errorf("inspect image %s: %w", spec.BaseImage, err)
	}
	if !spec.PullBase {
		return insp, fmt.Errorf("image %s is not present on the Docker engine", spec.BaseImage)
	}
	logf("Pulling image %s", spec.BaseImage)
	auth, err := registryAuth(spec.RegistryAuth)
	if err != nil {
		return insp, err
	}
	rc, err := d.cli.ImagePull(ctx, spec.BaseImage, image.PullOptions{RegistryAuth: auth})
	if err != nil {
		return insp, fmt.Errorf("pull image %s: %w", spec.BaseImage, err)
	}
	err = readPullProgress(rc)
	rc.Close()
	if err != nil {
		return insp, fmt.Errorf("pull image %s: %w", spec.BaseImage, err)
	}
	insp, err = d.cli.ImageInspect(ctx, spec.BaseImage)
	if err != nil {
		return insp, fmt.Errorf("inspect image %s after pull: %w", spec.BaseImage, err)
	}
	return insp, nil
}

// StartSandbox runs a build's image with envd, initialises envd with the
// sandbox's token, user, workdir and env, and starts the template's start
// command. Docker cannot snapshot a running process the way E2B's VM
// snapshots do, so the start command is launched anew in every sandbox
// rather than resumed where the build left it.
func (d *Docker) StartSandbox(ctx context.Context, spec SandboxSpec) (*Sandbox, error) {
	if spec.SandboxID == "" || spec.Image == "" {
		return nil, errors.New("start sandbox: sandbox ID and image are required")
	}
	rc, err := d.startContainer(ctx, containerRequest{
		image:    spec.Image,
		kind:     kindSandbox,
		id:       spec.SandboxID,
		token:    spec.AccessToken,
		labels:   d.labels(kindSandbox, spec.TemplateID, spec.BuildID, spec.SandboxID),
		cpuCount: spec.CPUCount,
		memoryMB: spec.MemoryMB,
		end:      spec.EndAt,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", spec.SandboxID, err)
	}
	if err := d.initSandbox(ctx, rc, spec); err != nil {
		d.discard(ctx, rc)
		return nil, fmt.Errorf("start sandbox %s: %w", spec.SandboxID, err)
	}
	return &Sandbox{ID: spec.SandboxID, ContainerID: rc.id, EnvdVersion: envd.Version}, nil
}

// initSandbox hands a sandbox's envd, just started, its token, user,
// workdir and env, and starts the template's start command.
func (d *Docker) initSandbox(ctx context.Context, rc *runningContainer, spec SandboxSpec) error {
	if err := rc.envd.Init(ctx, client.InitRequest{EnvVars: spec.Env, AccessToken: rc.token, DefaultUser: spec.User, DefaultWorkdir: spec.Workdir}); err != nil {
		return err
	}
	if spec.StartCmd != "" {
		sh, err := d.shellOf(ctx, rc.id)
		if err != nil {
			return err
		}
		d.startCommand(ctx, rc, spec, sh)
	}
	return nil
}

// startCommand runs the sandbox's start command in the background, as the
// default user in the default workdir. The stream stays attached for the
// sandbox's life, its output discarded; ending it (StopSandbox, Close)
// kills the command.
func (d *Docker) startCommand(ctx context.Context, rc *runningContainer, spec SandboxSpec, sh shell) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.mu.Lock()
	d.startCmds[spec.SandboxID] = cancel
	d.mu.Unlock()
	go func() {
		defer cancel()
		cmd, args := sh.command(spec.StartCmd)
		res, err := rc.envd.Run(ctx, client.RunRequest{Cmd: cmd, Args: args, MaxOutputBytes: 1})
		switch {
		case ctx.Err() != nil:
		case err != nil:
			d.log.Warn("sandbox start command failed", "sandbox", spec.SandboxID, "error", err)
		case res.ExitCode != 0:
			d.log.Warn("sandbox start command exited", "sandbox", spec.SandboxID, "exit_code", res.ExitCode)
		}
	}()
}

// StopSandbox removes the sandbox's container and its channel.
func (d *Docker) StopSandbox(ctx context.Context, sandboxID string) error {
	d.mu.Lock()
	if cancel, ok := d.startCmds[sandboxID]; ok {
		cancel()
		delete(d.startCmds, sandboxID)
	}
	d.mu.Unlock()
	list, err := d.list(ctx, filters.Arg("label", d.label("sandbox-id")+"="+sandboxID))
	if err != nil {
		return fmt.Errorf("stop sandbox %s: %w", sandboxID, err)
	}
	d.detach(attachKey(kindSandbox, sandboxID))
	var errs []error
	for _, c := range list {
		errs = append(errs, d.removeContainer(ctx, c.ID))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", sandboxID, err)
	}
	return nil
}

// list returns this instance's containers matching extra filters.
func (d *Docker) list(ctx context.Context, extra ...filters.KeyValuePair) ([]container.Summary, error) {
	args := filters.NewArgs(append(extra, filters.Arg("label", d.label("instance")+"="+d.opts.Instance))...)
	return d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
}

// RemoveOrphans removes this instance's build containers and the sandbox
// containers keep does not claim. The kept sandboxes are attached again:
// their channel opens when first needed. Then it removes this instance's
// build images (in ImageRepository, or untagged) that keepImage does not
// claim, envd volumes of other envd builds and images that no container
// uses, and
// prunes the layer cache (PruneLayers). Meant for start-up: builds running
// at the time are aborted.
func (d *Docker) RemoveOrphans(ctx context.Context, keep func(sandboxID string) bool, keepImage func(ref string) bool) error {
	list, err := d.list(ctx)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, c := range list {
		kind, id := c.Labels[d.label("kind")], ""
		switch kind {
		case kindBuild:
			id = c.Labels[d.label("build-id")]
		case kindSandbox:
			id = c.Labels[d.label("sandbox-id")]
		default:
			continue // the envd volume's, or started by hand from a build's image
		}
		if kind == kindSandbox && keep != nil && keep(id) {
			d.reattach(c, id)
			continue
		}
		d.log.Info("removing orphaned container", "container", shortID(c.ID), "kind", kind, "id", id)
		d.detach(attachKey(kind, id))
		errs = append(errs, d.removeContainer(ctx, c.ID))
	}
	errs = append(errs, d.removeOrphanImages(ctx, keepImage), d.removeEnvdVolumes(ctx, d.envdVolume), d.PruneLayers(ctx, d.opts.LayerCacheSize))
	return errors.Join(errs...)
}

// removeOrphanImages removes the images this instance committed (their
// labels say so) that keep does not claim: by tag within ImageRepository
// (other tags someone gave them are left alone), by ID when untagged. An
// image that child images still need loses its tag and stays for them.
func (d *Docker) removeOrphanImages(ctx context.Context, keep func(ref string) bool) error {
	images, err := d.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", d.label("instance")+"="+d.opts.Instance),
		filters.Arg("label", d.label("kind")+"="+kindImage),
	)})
	if err != nil {
		return fmt.Errorf("list images: %w", err)
	}
	var errs []error
	for _, img := range images {
		refs := img.RepoTags
		if len(refs) == 0 {
			refs = []string{img.ID}
		}
		for _, ref := range refs {
			ours := ref == img.ID || strings.HasPrefix(ref, d.opts.ImageRepository+"/")
			if !ours || (keep != nil && keep(ref)) {
				continue
			}
			d.log.Info("removing orphaned image", "image", ref)
			if err := d.RemoveImage(ctx, ref); err != nil && !cerrdefs.IsConflict(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// RemoveImage removes a build's image; a missing image is not an error.
func (d *Docker) RemoveImage(ctx context.Context, ref string) error {
	_, err := d.cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}
