package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/docker/docker/api/types/container"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/relay"
)

// ErrPortNotRelayed is the answer for a port other than envd's in a
// host-network container: there the sandbox's loopback is the host's, and
// relaying to it would open every host loopback service to whoever can
// reach the sandbox proxy.
var ErrPortNotRelayed = errors.New("with host networking only envd's port is relayed; the sandbox's ports are the host's own")

// attachment is the server's end of one container: the relay that reaches
// ports inside it and the egress proxy socket. Both sockets live in a host
// directory only the server writes, mounted read-only into the container:
// the server dials nothing the container can name or replace.
type attachment struct {
	dir     string
	network string
	relay   *relay.Listener
	egress  net.Listener // nil without an egress proxy

	uidOnce  sync.Once
	uidKnown chan struct{}
	rootUIDs []uint32 // the host uids the container's root may appear as
}

// maxEgressConns bounds one container's open egress connections.
const maxEgressConns = 256

func attachKey(kind, id string) string { return kind + "/" + id }

// attach creates dir (when missing) and listens on its relay socket and,
// for a container of its own network, its egress socket.
func (d *Docker) attach(key, dir, network string) (*attachment, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// Traversable, not listable or writable, by the container's users; what
	// protects the sockets is the read-only mount and the peer check.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	relayPath := filepath.Join(dir, relaySocketName)
	if len(relayPath) > maxSocketPath || len(filepath.Join(dir, egressSocketName)) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is longer than %d bytes", relayPath, maxSocketPath)
	}
	a := &attachment{dir: dir, network: network, uidKnown: make(chan struct{})}
	rl, err := relay.Listen(relayPath, relay.ListenOptions{
		CheckPeer: a.checkPeer,
		Logf: func(format string, args ...any) {
			d.log.Warn("relay", "msg", fmt.Sprintf(format, args...))
		},
	})
	if err != nil {
		return nil, fmt.Errorf("relay socket: %w", err)
	}
	a.relay = rl
	if d.egress != nil && network == NetworkNone {
		eln, err := relay.ListenUnix(filepath.Join(dir, egressSocketName))
		if err != nil {
			rl.Close()
			return nil, fmt.Errorf("egress socket: %w", err)
		}
		// A sandbox opening tunnels without end would exhaust the server's
		// file descriptors: at most maxEgressConns at once per container.
		a.egress = relay.LimitListener(eln, maxEgressConns)
		go func() { _ = d.egress.Serve(a.egress) }()
	}
	d.mu.Lock()
	old := d.attached[key]
	d.attached[key] = a
	d.mu.Unlock()
	if old != nil {
		old.close()
	}
	return a, nil
}

// checkPeer admits only relay connections from the container's root, the
// user envd runs as: the sandbox's other users cannot pose as envd and
// read the access token the server sends it.
func (a *attachment) checkPeer(ctx context.Context, cred *syscall.Ucred) error {
	select {
	case <-a.uidKnown:
	case <-ctx.Done():
		return fmt.Errorf("the container's root uid is not known yet: %w", ctx.Err())
	}
	if !slices.Contains(a.rootUIDs, cred.Uid) {
		return fmt.Errorf("peer uid %d is not the container's root (uid %v)", cred.Uid, a.rootUIDs)
	}
	return nil
}

func (a *attachment) setRootUIDs(uids ...uint32) {
	a.uidOnce.Do(func() {
		a.rootUIDs = uids
		close(a.uidKnown)
	})
}

// dialer returns a dial function for port through the relay.
func (a *attachment) dialer(port int) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) { return a.relay.Dial(ctx, port) }
}

func (a *attachment) close() {
	a.relay.Close()
	if a.egress != nil {
		a.egress.Close()
	}
}

// detach closes the container's sockets and removes its directory.
func (d *Docker) detach(key string) error {
	d.mu.Lock()
	a := d.attached[key]
	delete(d.attached, key)
	d.mu.Unlock()
	if a == nil {
		kind, id, _ := strings.Cut(key, "/")
		return os.RemoveAll(containerDir(d.opts.StateDir, kind, id))
	}
	a.close()
	return os.RemoveAll(a.dir)
}

// reattach gives a sandbox container kept from an earlier run of the
// server its relay again, at the same host path (the directory must stay
// the one the container has mounted), so that its envd redials.
func (d *Docker) reattach(ctx context.Context, c container.Summary, sandboxID, dir string) error {
	key := attachKey(kindSandbox, sandboxID)
	d.mu.Lock()
	_, ok := d.attached[key]
	d.mu.Unlock()
	if ok {
		return nil
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("the relay dir of a kept sandbox is gone: its envd cannot reconnect", "sandbox", sandboxID, "dir", dir)
	}
	network := c.Labels[d.label("network")]
	if network == "" {
		network = NetworkHost // containers of servers before the label
	}
	a, err := d.attach(key, dir, network)
	if err != nil {
		return fmt.Errorf("reattach sandbox %s: %w", sandboxID, err)
	}
	d.learnRootUID(ctx, c.ID, a)
	return nil
}

// learnRootUID finds the host uid the container's root runs as (0 unless
// user namespaces remap it) from its first process, for the relay's peer
// check. When that cannot be read (the engine's processes are not in our
// /proc), root or this server's own uid (a rootless engine maps the
// container's root to it) is accepted.
func (d *Docker) learnRootUID(ctx context.Context, containerID string, a *attachment) {
	uid, err := d.rootUID(ctx, containerID)
	if err != nil {
		d.log.Warn("cannot read the uid of the container's root; the relay accepts uid 0 and this server's uid", "container", shortID(containerID), "error", err)
		a.setRootUIDs(0, uint32(os.Geteuid())) //nolint:gosec // a uid is 32-bit and not negative
		return
	}
	a.setRootUIDs(uid)
}

func (d *Docker) rootUID(ctx context.Context, containerID string) (uint32, error) {
	insp, err := d.cli.ContainerInspect(ctx, containerID)
	if err != nil {
		return 0, err
	}
	if insp.State == nil || insp.State.Pid <= 0 {
		return 0, errors.New("the container has no process")
	}
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(insp.State.Pid), "status"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				break
			}
			uid, err := strconv.ParseUint(fields[0], 10, 32)
			return uint32(uid), err
		}
	}
	return 0, errors.New("no Uid line in the process status")
}

// DialSandbox opens a stream to port inside the sandbox's network
// namespace through its relay. A port nothing listens on gives a
// *relay.RefusedError.
func (d *Docker) DialSandbox(ctx context.Context, sandboxID string, port int) (net.Conn, error) {
	d.mu.Lock()
	a := d.attached[attachKey(kindSandbox, sandboxID)]
	d.mu.Unlock()
	if a == nil {
		return nil, fmt.Errorf("sandbox %s is not running on this server", sandboxID)
	}
	if a.network == NetworkHost && port != envd.Port {
		return nil, ErrPortNotRelayed
	}
	return a.relay.Dial(ctx, port)
}
