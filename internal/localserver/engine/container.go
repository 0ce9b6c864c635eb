package engine

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

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
	// runtime, when set, replaces the server's runtime (a self-test).
	runtime string
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
// from the envd volume of the image's architecture and nothing of the host
// mounted, waits for envd's
// health through the container's channel and returns. On error nothing is
// left behind.
func (d *Docker) startContainer(ctx context.Context, req containerRequest, prepare func(ctx context.Context, containerID string) error) (*runningContainer, error) {
	envdVolume, err := d.envdVolumeFor(ctx, req.image)
	if err != nil {
		return nil, err
	}
	key := attachKey(req.kind, req.id)
	labels := maps.Clone(req.labels)
	labels[d.label("network")] = d.opts.Network
	if d.opts.DiskSizeMB > 0 {
		labels[d.label(diskLimitLabel)] = strconv.Itoa(d.opts.DiskSizeMB)
	}
	cfg := &container.Config{
		Image: req.image,
		// envd must run as root to run processes as any user.
		User:       "0:0",
		Entrypoint: d.envdCommand(d.opts.Network),
		Labels:     labels,
	}
	hc := d.hostConfig(d.opts.Network, cmp.Or(req.runtime, d.runtime.Name))
	nameContainer(cfg, hc, d.opts.Network)
	// The engine's own volume and a tmpfs: no host path, so that any
	// engine works, local or not.
	hc.VolumesFrom = []string{envdVolume + ":ro"}
	hc.Tmpfs = map[string]string{containerRunDir: "mode=0700,size=1m"}
	hc.Resources = resources(req.cpuCount, req.memoryMB, d.opts.PidsLimit)
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
	if err := d.keepTmp(ctx, created.ID); err != nil {
		return fail(err)
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
	if removalInProgress(err) {
		err = d.awaitRemoval(ctx, containerID)
	}
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

// hostConfig is where the host configuration of every container the server
// creates starts, started or not: its network; the project's seccomp
// profile and no-new-privileges (setuid binaries and file capabilities
// gain nothing: processes keep at most what envd gave them); and the
// engine's own log of its output (json-file, what SandboxLogs reads)
// bounded, so that a container printing forever cannot fill the engine's
// disk.
func (d *Docker) hostConfig(network, runtime string) *container.HostConfig {
	hc := &container.HostConfig{
		Runtime:     runtime,
		NetworkMode: container.NetworkMode(network),
		SecurityOpt: []string{"no-new-privileges", d.seccompOpt},
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{
			"max-size": containerLogFileSize,
			"max-file": strconv.Itoa(containerLogFiles),
		}},
	}
	if network == NetworkHost {
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
