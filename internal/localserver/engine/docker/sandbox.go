package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/docker/docker/api/types/filters"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// StartSandbox runs a build's image with envd and initialises it
// (WarmSandbox, then InitSandbox): a fresh sandbox and one of the server's
// warm pool are made by the same two steps, only at different times.
// Docker cannot snapshot a running process the way E2B's VM snapshots do,
// so the start command is launched anew in every sandbox rather than
// resumed where the build left it. On error nothing is left behind.
func (d *Docker) StartSandbox(ctx context.Context, spec engine.SandboxSpec) (*engine.Sandbox, error) {
	sb, err := d.WarmSandbox(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := d.InitSandbox(ctx, spec); err != nil {
		if stopErr := d.StopSandbox(context.WithoutCancel(ctx), spec.SandboxID); stopErr != nil {
			d.log.Warn("container left behind", "sandbox", spec.SandboxID, "error", stopErr)
		}
		return nil, err
	}
	return sb, nil
}

// WarmSandbox creates and starts the container of sandbox spec.SandboxID
// (its hostname, labels, limits and network fixed from spec, as for any
// sandbox) and waits until its envd answers, without initialising envd:
// no token, env, user or start command yet. InitSandbox does that, at
// once for a fresh sandbox, at hand-out for a pooled one. On error
// nothing is left behind.
func (d *Docker) WarmSandbox(ctx context.Context, spec engine.SandboxSpec) (*engine.Sandbox, error) {
	if spec.SandboxID == "" || spec.Image == "" {
		return nil, errors.New("start sandbox: sandbox ID and image are required")
	}
	rc, err := d.startContainer(ctx, containerRequest{
		image:    spec.Image,
		kind:     kindSandbox,
		id:       spec.SandboxID,
		labels:   d.labels.of(kindSandbox, spec.TemplateID, spec.BuildID, spec.SandboxID),
		cpuCount: spec.CPUCount,
		memoryMB: spec.MemoryMB,
		end:      spec.EndAt,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", spec.SandboxID, err)
	}
	rc.att.MarkWarm()
	return &engine.Sandbox{ID: spec.SandboxID, ContainerID: rc.id, EnvdVersion: envd.Version}, nil
}

// InitSandbox hands the envd of a sandbox WarmSandbox started its token,
// user, workdir and env (envd's /init, as E2B's orchestrator does for a
// resumed sandbox) and starts the template's start command.
func (d *Docker) InitSandbox(ctx context.Context, spec engine.SandboxSpec) error {
	err := errors.New("the sandbox is not attached to this server")
	if a := d.channels.Get(attach.Key(kindSandbox, spec.SandboxID)); a != nil {
		err = d.initSandbox(ctx, a, spec)
	}
	if err != nil {
		return fmt.Errorf("start sandbox %s: %w", spec.SandboxID, err)
	}
	return nil
}

// initSandbox hands a sandbox's envd, just started, its token, user,
// workdir and env, and starts the template's start command.
func (d *Docker) initSandbox(ctx context.Context, a *attach.Attachment, spec engine.SandboxSpec) error {
	if err := a.Init(ctx, client.InitRequest{EnvVars: spec.Env, AccessToken: spec.AccessToken, DefaultUser: spec.User, DefaultWorkdir: spec.Workdir}); err != nil {
		return err
	}
	if spec.StartCmd != "" {
		sh, err := attach.FindShell(ctx, d.cli, a.ContainerID())
		if err != nil {
			return err
		}
		d.startCommand(ctx, a.Envd(), spec, sh)
	}
	return nil
}

// startCommand runs the sandbox's start command in the background, as the
// default user in the default workdir. The stream stays attached for the
// sandbox's life, its output discarded; ending it (StopSandbox, Close)
// kills the command.
func (d *Docker) startCommand(ctx context.Context, conn *client.Client, spec engine.SandboxSpec, sh attach.Shell) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.mu.Lock()
	d.startCmds[spec.SandboxID] = cancel
	d.mu.Unlock()
	go func() {
		defer cancel()
		cmd, args := sh.Command(spec.StartCmd)
		res, err := conn.Run(ctx, client.RunRequest{Cmd: cmd, Args: args, MaxOutputBytes: 1})
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
	list, err := d.labels.list(ctx, d.cli, filters.Arg("label", d.labels.key("sandbox-id")+"="+sandboxID))
	if err != nil {
		return fmt.Errorf("stop sandbox %s: %w", sandboxID, err)
	}
	d.channels.Detach(attach.Key(kindSandbox, sandboxID))
	var errs []error
	for _, c := range list {
		errs = append(errs, removeContainer(ctx, d.cli, c.ID))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", sandboxID, err)
	}
	if len(list) > 0 {
		d.awaited.removeUnused(ctx)
	}
	return nil
}

// DialSandbox opens a stream to port inside the sandbox's network
// namespace through its channel. A port nothing listens on gives a
// *relay.RefusedError; with host networking only envd's port is relayed
// (engine.ErrPortNotRelayed).
func (d *Docker) DialSandbox(ctx context.Context, sandboxID string, port int) (net.Conn, error) {
	a := d.channels.Get(attach.Key(kindSandbox, sandboxID))
	if a == nil {
		return nil, fmt.Errorf("sandbox %s is not running on this server", sandboxID)
	}
	return a.Dial(ctx, port)
}

// SetSandboxDeadline moves the end of the sandbox's container: envd stops
// it then, with or without the server. A zero end clears it.
func (d *Docker) SetSandboxDeadline(ctx context.Context, sandboxID string, end time.Time) error {
	a := d.channels.Get(attach.Key(kindSandbox, sandboxID))
	if a == nil {
		return fmt.Errorf("sandbox %s is not running on this server", sandboxID)
	}
	if err := a.SetEnd(ctx, end); err != nil {
		return fmt.Errorf("set the end of sandbox %s: %w", sandboxID, err)
	}
	return nil
}
