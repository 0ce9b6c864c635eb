package attach

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	docker "github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/relay"
)

// Gate is the way out of containers of network none: the egress proxy
// (CONNECT and absolute-URI requests) and the resolver that answers their
// DNS streams (relay.ReadDNS framing), under one policy.
type Gate interface {
	http.Handler
	ServeDNS(conn net.Conn)
}

// Channels holds the server's end of every container it runs, by Key: the
// attachments, their channels and the gate served on them.
type Channels struct {
	cli *docker.Client
	log *slog.Logger
	// egress serves the egress proxy on the egress streams of every channel
	// of a container of network none; nil when there is none.
	egress *http.Server
	// dns answers the DNS streams of the same channels.
	dns func(net.Conn)

	mu       sync.Mutex
	attached map[string]*Attachment
}

// NewChannels returns the attachments of a server reaching its containers
// through cli; gate, when not nil, is the way out offered inside
// containers of network none.
func NewChannels(cli *docker.Client, gate Gate, log *slog.Logger) *Channels {
	c := &Channels{cli: cli, log: log, attached: map[string]*Attachment{}}
	if gate != nil {
		c.dns = gate.ServeDNS
		c.egress = &http.Server{
			Handler:           gate,
			ReadHeaderTimeout: 30 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		}
	}
	return c
}

// Egress tells whether containers of network none are offered the egress
// proxy and the resolver (envd then listens for them: EnvdCommand).
func (c *Channels) Egress() bool { return c.egress != nil }

// Key names the attachment of a container: its kind and the build or
// sandbox ID it runs.
func Key(kind, id string) string { return kind + "/" + id }

// Attachment is the server's end of one container: its channel (package
// relay), opened through the engine's exec API when first needed and again
// after a server restart (a new attachment) or a reboot of the container
// (Restarted), the sandbox's end, handed to the agent on every new
// channel, and the one envd client of the container. A channel that ends
// while its container runs is not opened again: the container goes
// (agentLost).
type Attachment struct {
	owner       *Channels
	containerID string
	network     string
	envd        *client.Client

	mu      sync.Mutex
	ch      *relay.Channel // nil: open one; ended: the agent is lost
	token   string         // the access token every envd request carries
	end     time.Time      // the sandbox's end as last set; zero: none
	endSet  bool
	paused  bool // frozen: no channel can be opened, ends wait for the thaw
	freezes int  // how many times it was frozen
	closing bool
	// warm: started for the warm pool and not yet initialised, so nothing
	// of a user's runs in the container (MarkWarm, Init).
	warm bool
	// overrun is set when the engine stopped the container for its disk
	// limit.
	overrun *engine.DiskOverrun
}

// maxEgressConns bounds one container's open egress connections.
const maxEgressConns = 256

// openTimeout bounds starting a channel agent and its hello.
const openTimeout = 30 * time.Second

// Attach records the container of key as this server's to reach, ending
// the channel of a container it replaces. A non-zero end is the sandbox's,
// handed to the agent of its first channel.
func (c *Channels) Attach(key, containerID, network string, end time.Time) *Attachment {
	a := &Attachment{owner: c, containerID: containerID, network: network}
	if !end.IsZero() {
		a.end, a.endSet = end, true
	}
	a.envd = newEnvdClient(a)
	c.mu.Lock()
	old := c.attached[key]
	c.attached[key] = a
	c.mu.Unlock()
	if old != nil {
		old.close()
	}
	return a
}

// Get is the attachment of key; nil when there is none.
func (c *Channels) Get(key string) *Attachment {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attached[key]
}

// Detach forgets the container of key and ends its channel.
func (c *Channels) Detach(key string) {
	c.mu.Lock()
	a := c.attached[key]
	delete(c.attached, key)
	c.mu.Unlock()
	if a != nil {
		a.close()
	}
}

// Close ends every channel and the egress proxy.
func (c *Channels) Close() {
	c.mu.Lock()
	atts := c.attached
	c.attached = map[string]*Attachment{}
	c.mu.Unlock()
	for _, a := range atts {
		a.close()
	}
	if c.egress != nil {
		c.egress.Close()
	}
}

// ContainerID is the attached container's.
func (a *Attachment) ContainerID() string { return a.containerID }

// Network is the attached container's network mode.
func (a *Attachment) Network() string { return a.network }

// channel returns the container's open channel, opening one when there is
// none (or it ended).
func (a *Attachment) channel(ctx context.Context) (*relay.Channel, error) {
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
		return nil, ErrFrozen
	}
	if a.ch != nil {
		return nil, a.agentLost(ctx)
	}
	// Not bounded by the caller's (a health poll's second): an agent that
	// starts slowly on a busy engine would be started again and again.
	openCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), openTimeout)
	defer cancel()
	ch, err := a.owner.open(openCtx, a.containerID, a.network)
	if err != nil {
		return nil, err
	}
	if a.endSet {
		if err := ch.SetDeadline(openCtx, a.end); err != nil {
			ch.Close()
			return nil, fmt.Errorf("hand the sandbox's end to its channel: %w", err)
		}
	}
	if egress := a.owner.egress; egress != nil && a.network == engine.NetworkNone {
		go func() { _ = egress.Serve(relay.LimitListener(ch.Egress(), maxEgressConns)) }()
		go serveEach(relay.LimitListener(ch.DNS(), maxEgressConns), a.owner.dns)
	}
	a.ch = ch
	return ch, nil
}

// serveEach serves every connection ln accepts with serve until ln closes.
func serveEach(ln net.Listener, serve func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go serve(c)
	}
}

// open starts `envd ... --channel` in the container through the engine's
// exec API, as root, and opens the channel on its standard streams. Only
// the engine holds them: no other process of the container can speak for
// the agent.
func (c *Channels) open(ctx context.Context, containerID, network string) (*relay.Channel, error) {
	exec, err := c.cli.ContainerExecCreate(ctx, containerID, container.ExecOptions{
		User: "0:0", AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Cmd: append(EnvdCommand(network, c.Egress()), "--channel"),
	})
	if err != nil {
		return nil, fmt.Errorf("start the channel agent: %w", err)
	}
	// Not on ctx: the channel outlives the request that opened it.
	hj, err := c.cli.ContainerExecAttach(context.WithoutCancel(ctx), exec.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("start the channel agent: %w", err)
	}
	out, outW := io.Pipe()
	go func() {
		// Non-TTY exec output is framed (stdout and stderr apart); the
		// agent's stderr is only its error messages.
		_, err := stdcopy.StdCopy(outW, logWriter{c.log, containerID}, hj.Reader)
		outW.CloseWithError(err)
	}()
	rwc := execConn{out: out, hj: hj.Conn, close: hj.Close}
	ch, err := relay.Open(ctx, rwc)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", ShortID(containerID), err)
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
	log         *slog.Logger
	containerID string
}

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Warn("channel agent", "container", ShortID(w.containerID), "output", strings.TrimSpace(string(p)))
	return len(p), nil
}

// Dial opens a stream to port inside the container's network namespace
// through its channel. A port nothing listens on gives a
// *relay.RefusedError; in a host-network container only envd's port is
// relayed (engine.ErrPortNotRelayed).
func (a *Attachment) Dial(ctx context.Context, port int) (net.Conn, error) {
	if a.network == engine.NetworkHost && port != envd.Port {
		return nil, engine.ErrPortNotRelayed
	}
	ch, err := a.channel(ctx)
	if err != nil {
		return nil, err
	}
	return ch.Dial(ctx, port)
}

// SetEnd records the sandbox's end and hands it to the agent unless the
// container is frozen (then the thaw hands it over, see Thaw).
func (a *Attachment) SetEnd(ctx context.Context, end time.Time) error {
	a.mu.Lock()
	a.end, a.endSet = end, true
	paused := a.paused
	a.mu.Unlock()
	if paused {
		return nil
	}
	ch, err := a.channel(ctx)
	if err != nil {
		return err
	}
	return ch.SetDeadline(ctx, end)
}

// Freeze and Thaw follow pause and resume: no exec is possible in a
// frozen container, and ends set meanwhile are handed over at the thaw.
// Freeze is called before the pause, not after: it waits for a channel
// being opened and keeps others from starting, since runc cannot finish
// starting an exec in a container frozen meanwhile, and the engine then
// waits for that exec forever holding the container's lock, which every
// later call on the container waits for (seen with Docker 20.10: a
// container left paused, inspect hanging).
func (a *Attachment) Freeze() { a.setPaused(true) }

// ErrFrozen is the answer of StartExec for a paused container.
var ErrFrozen = errors.New("the container is paused")

// StartExec runs start, which starts a process of the server's in the
// container through the engine's exec API and returns once the engine runs
// it, unless the container is frozen (ErrFrozen); a pause or a commit waits
// for it (Freeze says why).
func (a *Attachment) StartExec(start func() error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.paused {
		return ErrFrozen
	}
	return start()
}

// WhileFrozen runs fn, which pauses the container for its while (a commit),
// frozen as after Freeze, and then leaves the attachment as it was.
func (a *Attachment) WhileFrozen(fn func() error) error {
	a.mu.Lock()
	was := a.paused
	a.paused = true
	a.freezes++
	a.mu.Unlock()
	defer a.setPaused(was)
	return fn()
}

// Freezes counts the times the container was frozen so far, for a process
// that did not answer in time to be told from one that was frozen
// meanwhile.
func (a *Attachment) Freezes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.freezes
}

// Thaw marks the container running again and hands its agent the end set
// while it was frozen.
func (a *Attachment) Thaw(ctx context.Context) error {
	a.setPaused(false)
	a.mu.Lock()
	end, endSet := a.end, a.endSet
	a.mu.Unlock()
	if !endSet {
		return nil
	}
	ch, err := a.channel(ctx)
	if err != nil {
		return err
	}
	return ch.SetDeadline(ctx, end)
}

// Restarted marks a container started again (a stopped sandbox booted
// anew): its channel, which ended with it, is opened again and gets the
// sandbox's end, as any new channel does.
func (a *Attachment) Restarted() {
	a.mu.Lock()
	a.paused = false
	a.ch = nil
	a.mu.Unlock()
}

// errAgentLost is the answer for a container whose channel agent ended
// while it ran.
var errAgentLost = errors.New("the sandbox's channel agent ended while the sandbox ran (a process in it killed it): the sandbox is stopped, as when envd dies")

// agentLost answers a request for a channel that ended. When the
// container still runs, a process in it killed the agent: a new agent
// would be readable through /proc until it seals itself (relay.Seal), and
// a process of the container may wait for it to read what the server
// sends (design/engine-channel.md, "Only envd may act as envd"). So none
// is started: the container is killed, as when envd dies, and the
// engine's events end its sandbox or build. Called with a.mu held.
func (a *Attachment) agentLost(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), openTimeout)
	defer cancel()
	insp, err := a.owner.cli.ContainerInspect(ctx, a.containerID)
	if err != nil {
		return fmt.Errorf("the container's channel ended: %w", err)
	}
	if insp.State == nil || !insp.State.Running {
		return errors.New("the container is not running")
	}
	a.owner.log.Warn("the channel agent of a running container ended: stopping the container, as when envd dies", "container", ShortID(a.containerID))
	if err := a.owner.cli.ContainerKill(ctx, a.containerID, "KILL"); err != nil && !strings.Contains(err.Error(), "is not running") {
		return fmt.Errorf("%w; stopping the container: %w", errAgentLost, err)
	}
	return errAgentLost
}

func (a *Attachment) setPaused(paused bool) {
	a.mu.Lock()
	if paused && !a.paused {
		a.freezes++
	}
	a.paused = paused
	a.mu.Unlock()
}

// MarkWarm records that the container was started for the warm pool:
// until Init hands it out, it runs only envd.
func (a *Attachment) MarkWarm() {
	a.mu.Lock()
	a.warm = true
	a.mu.Unlock()
}

// Warm reports whether the container is in the warm pool (MarkWarm), not
// yet handed out (Init).
func (a *Attachment) Warm() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.warm
}

// SetOverrun records that the engine stopped the container for its disk
// limit, before it does, so that the step it ends finds the reason.
func (a *Attachment) SetOverrun(o *engine.DiskOverrun) {
	a.mu.Lock()
	a.overrun = o
	a.mu.Unlock()
}

// Overrun is why the engine stopped the container; nil when it did not (or
// a is nil).
func (a *Attachment) Overrun() *engine.DiskOverrun {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.overrun
}

func (a *Attachment) close() {
	a.mu.Lock()
	a.closing = true
	ch := a.ch
	a.ch = nil
	a.mu.Unlock()
	if ch != nil {
		ch.Close()
	}
}

// ShortID is the short form of a container or image ID, for messages.
func ShortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
