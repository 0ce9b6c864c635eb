package docker

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// diskLimitLabel carries a container's disk limit in MiB, so that the
// limit it was created with holds across server restarts and flag changes.
const diskLimitLabel = "disk-limit-mb"

// EnforceDiskLimits stops (SIGKILL) every running container of this server
// whose file system grew past the disk limit it was created with, as the
// engine measures it (the writable layer and the image below it): this
// works on every engine, storage driver and runtime, where a quota of the
// storage driver (StorageOpt size) needs overlay2 on xfs with pquota. A
// build container's running step then fails with the overrun as its error;
// the sandboxes stopped are returned, for the server to stop and report.
// A writer can pass the limit by what it writes between two calls.
func (d *Docker) EnforceDiskLimits(ctx context.Context) ([]engine.DiskOverrun, error) {
	list, err := d.cli.ContainerList(ctx, container.ListOptions{Size: true, Filters: filters.NewArgs(
		filters.Arg("label", d.labels.key("instance")+"="+d.labels.instance),
		filters.Arg("label", d.labels.key(diskLimitLabel)),
		filters.Arg("status", "running"),
	)})
	if err != nil {
		return nil, fmt.Errorf("measure the containers' disk use: %w", err)
	}
	var stopped []engine.DiskOverrun
	var errs []error
	for _, c := range list {
		limit := diskLimit(c.Labels[d.labels.key(diskLimitLabel)])
		if limit <= 0 || c.SizeRootFs <= limit {
			continue
		}
		o := engine.DiskOverrun{SandboxID: c.Labels[d.labels.key("sandbox-id")], BuildID: c.Labels[d.labels.key("build-id")], Used: c.SizeRootFs, Limit: limit}
		kind := c.Labels[d.labels.key("kind")]
		if kind == kindBuild {
			// Recorded before the kill, so that the step it ends finds it.
			if a := d.channels.Get(attach.Key(kindBuild, o.BuildID)); a != nil {
				a.SetOverrun(&o)
			}
		}
		if err := d.cli.ContainerKill(ctx, c.ID, "KILL"); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("stop container %s past its disk limit: %w", attach.ShortID(c.ID), err))
			continue
		}
		if kind == kindSandbox {
			// The server stops the sandbox and logs why (so this end is
			// no SandboxEnd).
			d.channels.Detach(attach.Key(kindSandbox, o.SandboxID))
			stopped = append(stopped, o)
			continue
		}
		d.log.Warn("container stopped: its files grew past its disk limit", "container", attach.ShortID(c.ID), "kind", kind,
			"build", o.BuildID, "used_mib", o.Used>>20, "limit_mib", o.Limit>>20)
	}
	return stopped, errors.Join(errs...)
}

// diskLimit parses a disk limit label into bytes; 0 when absent or bad.
func diskLimit(label string) int64 {
	mb, err := strconv.ParseInt(label, 10, 32)
	if err != nil || mb <= 0 {
		return 0
	}
	return mb << 20
}
