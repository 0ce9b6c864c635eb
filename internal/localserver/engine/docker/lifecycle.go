package docker

import (
	"context"
	"errors"
	"fmt"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// sandboxContainer is the ID of the sandbox's container.
func (d *Docker) sandboxContainer(ctx context.Context, sandboxID string) (string, error) {
	list, err := d.labels.list(ctx, d.cli, filters.Arg("label", d.labels.key("sandbox-id")+"="+sandboxID))
	if err != nil {
		return "", err
	}
	for _, c := range list {
		if c.Labels[d.labels.key("kind")] == kindSandbox {
			return c.ID, nil
		}
	}
	return "", fmt.Errorf("sandbox %s has no container", sandboxID)
}

// PauseSandbox freezes every process of the sandbox (docker pause, the
// cgroup freezer): their memory stays as it is while the engine runs, and
// the container keeps its file system.
func (d *Docker) PauseSandbox(ctx context.Context, sandboxID string) error {
	id, err := d.sandboxContainer(ctx, sandboxID)
	if err != nil {
		return fmt.Errorf("pause sandbox %s: %w", sandboxID, err)
	}
	a := d.channels.Get(attach.Key(kindSandbox, sandboxID))
	if a != nil {
		a.Freeze()
	}
	if err := d.cli.ContainerPause(ctx, id); err != nil {
		if a != nil {
			_ = a.Thaw(ctx) // the container was never paused; the pause's error is the answer
		}
		return fmt.Errorf("pause sandbox %s: %w", sandboxID, err)
	}
	return nil
}

// ResumeSandbox thaws a paused sandbox: its processes go on where they
// were. A sandbox whose container stopped (the engine restarted) is booted
// again from its file system: envd and the start command start afresh,
// initialised from spec, as E2B resumes a sandbox without its memory.
func (d *Docker) ResumeSandbox(ctx context.Context, spec engine.SandboxSpec) error {
	// A thawed sandbox's agent gets the end set while it was frozen.
	thawed := func() error {
		if a := d.channels.Get(attach.Key(kindSandbox, spec.SandboxID)); a != nil {
			return a.Thaw(ctx)
		}
		return nil
	}
	id, err := d.sandboxContainer(ctx, spec.SandboxID)
	if err == nil {
		var insp container.InspectResponse
		insp, err = d.cli.ContainerInspect(ctx, id)
		switch {
		case err != nil:
		case insp.State != nil && insp.State.Paused:
			if err = d.cli.ContainerUnpause(ctx, id); err == nil {
				err = thawed()
			}
		case insp.State != nil && insp.State.Running:
			err = thawed()
		default:
			err = d.reboot(ctx, id, spec)
		}
	}
	if err != nil {
		return fmt.Errorf("resume sandbox %s: %w", spec.SandboxID, err)
	}
	return nil
}

// reboot starts the stopped container of a sandbox again and initialises
// its envd through a new channel; the agent gets the sandbox's end anew
// (the container's tmpfs started empty).
func (d *Docker) reboot(ctx context.Context, containerID string, spec engine.SandboxSpec) error {
	a := d.channels.Get(attach.Key(kindSandbox, spec.SandboxID))
	if a == nil {
		return errors.New("the sandbox is not attached to this server")
	}
	d.log.Info("booting a stopped sandbox container again", "sandbox", spec.SandboxID, "container", attach.ShortID(containerID))
	if err := keepTmp(ctx, d.cli, d.runtime, containerID); err != nil {
		return err
	}
	if err := d.cli.ContainerStart(ctx, containerID, container.StartOptions{}); err != nil {
		return err
	}
	a.Restarted()
	if err := d.waitEnvd(ctx, containerID, a.Envd()); err != nil {
		return err
	}
	return d.initSandbox(ctx, a, spec)
}
