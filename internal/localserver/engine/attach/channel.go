package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/relay"
)

// ErrPortNotRelayed is the answer for a port other than envd's in a
// host-network container: there the sandbox's loopback is the host's, and
// relaying to it would open every host loopback service to whoever can
// reach the sandbox proxy.
var ErrPortNotRelayed = errors.New("with host networking only envd's port is relayed; the sandbox's ports are the host's own")

// attachment is the server's end of one container: its channel (package
// relay), opened through the engine's exec API when first needed and again
// whenever it ended (a server restart, a killed agent, a rebooted
// container), and the sandbox's end, handed to the agent on every new
// channel.
type attachment struct {
	containerID string
	network     string

	mu      sync.Mutex
	ch      *relay.Channel // nil or ended: open a new one
	end     time.Time      // the sandbox's end as last set; zero: none
	endSet  bool
	paused  bool // frozen: no channel can be opened, ends wait for the thaw
	closing bool
	// overrun is set when EnforceDiskLimits stopped the container.
	overrun *DiskOverrun
}

// maxEgressConns bounds one container's open egress connections.
const maxEgressConns = 256

// openTimeout bounds starting a channel agent and its hello.
const openTimeout = 30 * time.Second

func attachKey(kind, id string) string { return kind + "/" + id }

// attach records the container of key as this server's to reach.
func (d *Docker) attach(key, containerID, network string) *attachment {
	a := &attachment{containerID: containerID, network: network}
	d.mu.Lock()
	old := d.attached[key]
	d.attached[key] = a
	d.mu.Unlock()
	if old != nil {
		old.close()
	}
	return a
}

func (d *Docker) attachment(key string) *attachment {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.attached[key]
}

// channel returns the container's open channel, opening one when there is
// none (or it ended).
func (d *Docker) channel(ctx context.Context, a *attachment) (*relay.Channel, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing {
		return nil, errors.New("the container is being removed")
	}
	if a.ch != nil {
		select {
		case <-a.ch.Done():
		default:
			return a.ch, nil
		}
	}
	if a.paused {
		return nil, errors.New("the container is paused")
	}
	// Not bounded by the caller's (a health poll's second): an agent that
	// starts slowly on a busy engine would be started again and again.
	openCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), openTimeout)
	defer cancel()
	ch, err := d.openChannel(openCtx, a.containerID, a.network)
	if err != nil {
		return nil, err
	}
	if a.endSet {
		if err := ch.SetDeadline(openCtx, a.end); err != nil {
			ch.Close()
			return nil, fmt.Errorf("hand the sandbox's end to its channel: %w", err)
		}
	}
	if d.egress != nil && a.network == NetworkNone {
		go func() { _ = d.egress.Serve(relay.LimitListener(ch.Egress(), maxEgressConns)) }()
	}
	a.ch = ch
	return ch, nil
}

// openChannel starts `envd ... --channel` in the container through the
// engine's exec API, as root, and opens the channel on its standard
// streams. Only the engine holds them: no other process of the container
// can speak for the agent.
func (d *Docker) openChannel(ctx context.Context, containerID, network string) (*relay.Channel, error) {
	exec, err := d.cli.ContainerExecCreate(ctx, containerID, container.ExecOptions{
		User: "0:0", AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Cmd: append(d.envdCommand(network), "--channel"),
	})
	if err != nil {
		return nil, fmt.Errorf("start the channel agent: %w", err)
	}
	// Not on ctx: the channel outlives the request that opened it.
	hj, err := d.cli.ContainerExecAttach(context.WithoutCancel(ctx), exec.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("start the channel agent: %w", err)
	}
	out, outW := io.Pipe()
	go func() {
		// Non-TTY exec output is framed (stdout and stderr apart); the
		// agent's stderr is only its error messages.
		_, err := stdcopy.StdCopy(outW, logWriter{d, containerID}, hj.Reader)
		outW.CloseWithError(err)
	}()
	rwc := execConn{out: out, hj: hj.Conn, close: hj.Close}
	ch, err := relay.Open(ctx, rwc)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", shortID(containerID), err)
	}
	return ch, nil
}

// execConn is an exec session's demultiplexed output and its input.
type execConn struct {
	out   *io.PipeReader
	hj    net.Conn
	close func()
}

func (c execConn) Read(p []byte) (int, error)  { return c.out.Read(p) }
func (c execConn) Write(p []byte) (int, error) { return c.hj.Write(p) }
func (c execConn) Close() error {
	c.close()
	return c.out.Close()
}

// logWriter logs what the agent writes to its stderr.
type logWriter struct {
	d           *Docker
	containerID string
}

func (w logWriter) Write(p []byte) (int, error) {
	w.d.log.Warn("channel agent", "container", shortID(w.containerID), "output", strings.TrimSpace(string(p)))
	return len(p), nil
}

// dialer returns a dial function for port through the container's channel.
func (d *Docker) dialer(a *attachment, port int) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		ch, err := d.channel(ctx, a)
		if err != nil {
			return nil, err
		}
		return ch.Dial(ctx, port)
	}
}

// setEnd records the sandbox's end and hands it to the agent unless the
// container is frozen (then the thaw hands it over, see thawed).
func (d *Docker) setEnd(ctx context.Context, a *attachment, end time.Time) error {
	a.mu.Lock()
	a.end, a.endSet = end, true
	paused := a.paused
	a.mu.Unlock()
	if paused {
		return nil
	}
	ch, err := d.channel(ctx, a)
	if err != nil {
		return err
	}
	return ch.SetDeadline(ctx, end)
}

// frozen and thawed follow pause and resume: no exec is possible in a
// frozen container, and ends set meanwhile are handed over at the thaw.
func (a *attachment) frozen(paused bool) {
	a.mu.Lock()
	a.paused = paused
	a.mu.Unlock()
}

func (a *attachment) setOverrun(o *DiskOverrun) {
	a.mu.Lock()
	a.overrun = o
	a.mu.Unlock()
}

// diskOverrun is why EnforceDiskLimits stopped the container; nil when it
// did not (or a is nil).
func (a *attachment) diskOverrun() *DiskOverrun {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.overrun
}

func (d *Docker) thawed(ctx context.Context, a *attachment) error {
	a.frozen(false)
	a.mu.Lock()
	end, endSet := a.end, a.endSet
	a.mu.Unlock()
	if !endSet {
		return nil
	}
	ch, err := d.channel(ctx, a)
	if err != nil {
		return err
	}
	return ch.SetDeadline(ctx, end)
}

func (a *attachment) close() {
	a.mu.Lock()
	a.closing = true
	ch := a.ch
	a.ch = nil
	a.mu.Unlock()
	if ch != nil {
		ch.Close()
	}
}

// detach forgets the container of key and ends its channel.
func (d *Docker) detach(key string) {
	d.mu.Lock()
	a := d.attached[key]
	delete(d.attached, key)
	d.mu.Unlock()
	if a != nil {
		a.close()
	}
}

// reattach gives a sandbox container kept from an earlier run of the
// server its attachment again; the channel opens when first needed.
func (d *Docker) reattach(c container.Summary, sandboxID string) {
	network := c.Labels[d.label("network")]
	if network == "" {
		network = NetworkHost // containers of servers before the label
	}
	a := d.attach(attachKey(kindSandbox, sandboxID), c.ID, network)
	a.frozen(c.State == "paused")
}

// DialSandbox opens a stream to port inside the sandbox's network
// namespace through its channel. A port nothing listens on gives a
// *relay.RefusedError.
func (d *Docker) DialSandbox(ctx context.Context, sandboxID string, port int) (net.Conn, error) {
	a := d.attachment(attachKey(kindSandbox, sandboxID))
	if a == nil {
		return nil, fmt.Errorf("sandbox %s is not running on this server", sandboxID)
	}
	if a.network == NetworkHost && port != envd.Port {
		return nil, ErrPortNotRelayed
	}
	return d.dialer(a, port)(ctx)
}
