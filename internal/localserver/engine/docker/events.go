package docker

import (
	"context"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// WatchSandboxEnds calls ended for each container of a sandbox this server
// runs that the engine reports exited or removed, and logs the processes
// the kernel killed for memory ("oom", after which a sandbox goes on), until
// ctx ends. A container the server removes itself is detached first, so its
// end is not reported. The engine's event stream is taken again when it
// breaks (an engine restart).
func (d *Docker) WatchSandboxEnds(ctx context.Context, ended func(engine.SandboxEnd)) {
	f := filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("label", d.labels.key("instance")+"="+d.labels.instance),
		filters.Arg("label", d.labels.key("kind")+"="+kindSandbox),
		filters.Arg("event", string(events.ActionDie)),
		filters.Arg("event", string(events.ActionOOM)),
		filters.Arg("event", string(events.ActionDestroy)),
	)
	for ctx.Err() == nil {
		messages, failed := d.cli.Events(ctx, events.ListOptions{Filters: f})
		d.forwardEnds(ctx, messages, failed, ended)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// forwardEnds passes one event stream's sandbox ends to ended until the
// stream or ctx ends.
func (d *Docker) forwardEnds(ctx context.Context, messages <-chan events.Message, failed <-chan error, ended func(engine.SandboxEnd)) {
	for {
		select {
		case <-ctx.Done():
			return
		case err := <-failed:
			if ctx.Err() == nil {
				d.log.Warn("the engine's event stream broke: sandboxes that end meanwhile are seen at their next use", "err", err)
			}
			return
		case m := <-messages:
			sandboxID := m.Actor.Attributes[d.labels.key("sandbox-id")]
			a := d.channels.Get(attach.Key(kindSandbox, sandboxID))
			if a == nil || a.ContainerID() != m.Actor.ID {
				continue // removed by the server, or not (or no longer) this sandbox's container
			}
			switch m.Action {
			case events.ActionOOM:
				d.log.Warn("the kernel killed a process of a sandbox for memory", "sandbox", sandboxID)
			case events.ActionDie:
				ended(engine.SandboxEnd{SandboxID: sandboxID, ExitCode: m.Actor.Attributes["exitCode"]})
			case events.ActionDestroy:
				ended(engine.SandboxEnd{SandboxID: sandboxID, Removed: true})
			}
		}
	}
}
