package docker

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	docker "github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// containerRequest is what differs between build and sandbox containers.
type containerRequest struct {
	image    string
	kind     string
	id       string // build or sandbox ID, names its attachment
	token    string // envd access token; empty leaves envd open until Init
	labels   map[string]string
	cpuCount int32
	memoryMB int32
	// end, when set, is when envd ends the container (a sandbox's end).
	end time.Time
	// runtime, when set, replaces the server's runtime (a self-test).
	runtime string
}

// runningContainer is a started container with envd answering.
type runningContainer struct {
	id  string
	key string // attach.Key of its attachment
	att *attach.Attachment
}

// startContainer creates and starts a container running envd, with envd
// from the envd volume of the image's architecture and nothing of the host
// mounted, waits for envd's
// health through the container's channel and returns. On error nothing is
// left behind.
func (d *Docker) startContainer(ctx context.Context, req containerRequest, prepare func(ctx context.Context, containerID string) error) (*runningContainer, error) {
	envdVolume, err := d.envd.For(ctx, req.image)
	if err != nil {
		return nil, err
	}
	key := attach.Key(req.kind, req.id)
	labels := maps.Clone(req.labels)
	labels[d.labels.key("network")] = d.opts.Network
	if d.opts.DiskSizeMB > 0 {
		labels[d.labels.key(diskLimitLabel)] = strconv.Itoa(d.opts.DiskSizeMB)
	}
	if d.opts.InodesPerSandbox > 0 {
		labels[d.labels.key(fileLimitLabel)] = strconv.FormatInt(d.opts.InodesPerSandbox, 10)
	}
	cfg := &container.Config{
		Image: req.image,
		// envd must run as root to run processes as any user.
		User:       "0:0",
		Entrypoint: attach.EnvdCommand(d.opts.Network, d.channels.Egress()),
		Labels:     labels,
	}
	hc := hostConfig(d.opts.Network, cmp.Or(req.runtime, d.runtime.Name), d.seccompOpt, req.runtime == "" && d.setuid)
	nameContainer(cfg, hc, d.opts.Network)
	// The engine's own volume and a tmpfs: no host path, so that any
	// engine works, local or not.
	hc.VolumesFrom = []string{envdVolume + ":ro"}
	hc.Tmpfs = map[string]string{attach.RunDir: "mode=0700,size=1m"}
	hc.Resources = resources(req.cpuCount, req.memoryMB, d.opts.PidsLimit)
	if req.runtime == "" && d.runtime.GVisor && req.memoryMB > 0 {
		// gVisor's kernel has no out-of-memory killer: envd is the
		// sandbox's, at the template's memory, and the container's limit
		// leaves room above it for gVisor's own memory (its Sentry's
		// heap and network buffers), which the host's kernel counts too.
		cfg.Entrypoint = append(cfg.Entrypoint, memoryLimitFlag, strconv.Itoa(int(req.memoryMB)))
		hc.Memory += GVisorMemoryHeadroomMB << 20
		hc.MemorySwap = hc.Memory
	}
	if hc.StorageOpt, err = d.quota.storageOpt(ctx, req.image); err != nil {
		return nil, err
	}
	hc.Init = boolPtr(true)
	// Docker's default set minus NET_RAW (raw and packet sockets) and
	// MKNOD; named one by one so that a changed engine default cannot
	// widen it.
	hc.CapDrop = []string{"ALL"}
	hc.CapAdd = containerCaps
	// Not on ctx: a cancel that lands while the engine creates the
	// container would leave one that nothing records. The cancel is seen
	// just after, and the container removed.
	createCtx, cancelCreate := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	created, err := d.cli.ContainerCreate(createCtx, cfg, hc, nil, nil, "")
	cancelCreate()
	if err != nil {
		return nil, fmt.Errorf("create container from %s: %w", req.image, err)
	}
	att := d.channels.Attach(key, created.ID, d.opts.Network, req.end)
	att.SetToken(req.token)
	rc := &runningContainer{id: created.ID, key: key, att: att}
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
	if err := keepTmp(ctx, d.cli, d.runtime, created.ID); err != nil {
		return fail(err)
	}
	if err := d.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return fail(fmt.Errorf("start container from %s: %w", req.image, err))
	}
	if err := d.waitEnvd(ctx, created.ID, att.Envd()); err != nil {
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
				return fmt.Errorf("envd did not start: container exited with code %d: %s", insp.State.ExitCode, logsTail(ctx, d.cli, containerID))
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("envd did not answer through the container's channel within %s: %v; container output: %s", d.opts.EnvdStartTimeout, err, logsTail(ctx, d.cli, containerID))
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// logsTail returns the last lines a container wrote, for error messages.
func logsTail(ctx context.Context, cli *docker.Client, containerID string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	rc, err := cli.ContainerLogs(ctx, containerID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
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
func removeContainer(ctx context.Context, cli *docker.Client, containerID string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	err := cli.ContainerRemove(ctx, containerID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if removalInProgress(err) {
		err = awaitRemoval(ctx, cli, containerID)
	}
	if isNotFound(err) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("remove container %s: %w", attach.ShortID(containerID), err)
	}
	return err
}

// discard removes a container that failed to start or has served its
// purpose, and its channel. A failure is logged, not returned: the
// caller's own outcome stands, and RemoveOrphans removes the container at
// the next start.
func (d *Docker) discard(ctx context.Context, rc *runningContainer) {
	d.channels.Detach(rc.key)
	if err := removeContainer(ctx, d.cli, rc.id); err != nil {
		d.log.Warn("container left behind", "container", attach.ShortID(rc.id), "error", err)
		return
	}
	d.awaited.removeUnused(ctx)
}

// hostConfig is where the host configuration of every container the server
// creates starts, started or not: its network; the project's seccomp
// profile; no-new-privileges (setuid binaries and file capabilities gain
// nothing: processes keep at most what envd gave them) unless setuid;
// and the engine's own log of its output (json-file, what SandboxLogs
// reads) bounded, so that a container printing forever cannot fill the
// engine's disk.
func hostConfig(network, runtime, seccompOpt string, setuid bool) *container.HostConfig {
	secOpts := []string{"no-new-privileges", seccompOpt}
	if setuid {
		secOpts = secOpts[1:]
	}
	hc := &container.HostConfig{
		Runtime:     runtime,
		NetworkMode: container.NetworkMode(network),
		SecurityOpt: secOpts,
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{
			"max-size": containerLogFileSize,
			"max-file": strconv.Itoa(containerLogFiles),
		}},
	}
	if network == engine.NetworkHost {
		// An engine with --userns-remap refuses the host's network to a
		// remapped container; host networking, unsafe for untrusted code
		// anyway, then runs in the host's user namespace.
		hc.UsernsMode = "host"
	}
	return hc
}

// The engine keeps at most containerLogFiles files of containerLogFileSize
// of a container's output: 20 MiB, more than SandboxLogs reads
// (maxLogBytes).
const (
	containerLogFileSize = "10m"
	containerLogFiles    = 2
)

// containerCaps are the capabilities of sandbox and build containers:
// what package managers (apt drops to _apt: SETUID, SETGID), useradd,
// chown and chmod (CHOWN, DAC_OVERRIDE, FOWNER, FSETID) and common
// daemons (NET_BIND_SERVICE, SYS_CHROOT for sshd, AUDIT_WRITE for sudo
// and login) need. NET_RAW and MKNOD of Docker's default set are left out.
var containerCaps = []string{
	"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "SETFCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "AUDIT_WRITE",
}

// GVisorMemoryHeadroomMB is what a gVisor container's memory limit adds
// to the template's memory for gVisor's own processes. Measured: a
// container at up to 176 MiB, the Sentry 156 MiB resident, with 4,096 inotify
// instances, 500 connections through the proxy and a 512 MiB upload
// through the egress proxy (design/performance.md).
const GVisorMemoryHeadroomMB = 256

// memoryLimitFlag is envd's flag for the sandbox's memory, which it
// enforces (gVisor).
const memoryLimitFlag = "--memory-limit-mb"

// envdMemoryLimitMB is the memory a container's envd holds its processes
// to (memoryLimitFlag), 0 when none.
func envdMemoryLimitMB(cfg *container.Config) int64 {
	if cfg == nil {
		return 0
	}
	if i := slices.Index(cfg.Entrypoint, memoryLimitFlag); i >= 0 && i+1 < len(cfg.Entrypoint) {
		mb, _ := strconv.ParseInt(cfg.Entrypoint[i+1], 10, 64)
		return mb
	}
	return 0
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
