package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
)

// DefaultDiskSizeMB is the default disk limit of a sandbox or build
// container, the disk of E2B's base tier (10 GiB).
const DefaultDiskSizeMB = 10 << 10

// diskLimitLabel carries a container's disk limit in MiB, so that the
// limit it was created with holds across server restarts and flag changes.
const diskLimitLabel = "disk-limit-mb"

// DiskOverrun is a container whose file system grew past its disk limit,
// stopped for it.
type DiskOverrun struct {
	// SandboxID is the sandbox's ID; empty for a build container.
	SandboxID string
	BuildID   string
	// Used and Limit are in bytes: the size of the container's file system
	// (image and changes) as the engine measured it, and its limit.
	Used, Limit int64
}

func (o *DiskOverrun) Error() string {
	what := "the sandbox's"
	if o.SandboxID == "" {
		what = "the build container's"
	}
	return fmt.Sprintf("%s files grew to %d MiB, past the disk limit of %d MiB: it was stopped", what, o.Used>>20, o.Limit>>20)
}

// EnforceDiskLimits stops (SIGKILL) every running container of this server
// whose file system grew past the disk limit it was created with, as the
// engine measures it (the writable layer and the image below it): this
// works on every engine, storage driver and runtime, where a quota of the
// storage driver (StorageOpt size) needs overlay2 on xfs with pquota. A
// build container's running step then fails with the overrun as its error;
// the sandboxes stopped are returned, for the server to stop and report.
// A writer can pass the limit by what it writes between two calls.
func (d *Docker) EnforceDiskLimits(ctx context.Context) ([]DiskOverrun, error) {
	list, err := d.cli.ContainerList(ctx, container.ListOptions{Size: true, Filters: filters.NewArgs(
		filters.Arg("label", d.label("instance")+"="+d.opts.Instance),
		filters.Arg("label", d.label(diskLimitLabel)),
		filters.Arg("status", "running"),
	)})
	if err != nil {
		return nil, fmt.Errorf("measure the containers' disk use: %w", err)
	}
	var stopped []DiskOverrun
	var errs []error
	for _, c := range list {
		limit := diskLimit(c.Labels[d.label(diskLimitLabel)])
		if limit <= 0 || c.SizeRootFs <= limit {
			continue
		}
		o := DiskOverrun{SandboxID: c.Labels[d.label("sandbox-id")], BuildID: c.Labels[d.label("build-id")], Used: c.SizeRootFs, Limit: limit}
		kind := c.Labels[d.label("kind")]
		if kind == kindBuild {
			// Recorded before the kill, so that the step it ends finds it.
			if a := d.attachment(attachKey(kindBuild, o.BuildID)); a != nil {
				a.setOverrun(&o)
			}
		}
		if err := d.cli.ContainerKill(ctx, c.ID, "KILL"); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("stop container %s past its disk limit: %w", shortID(c.ID), err))
			continue
		}
		if kind == kindSandbox {
			// The server stops the sandbox and logs why (so this end is
			// no SandboxEnd).
			d.detach(attachKey(kindSandbox, o.SandboxID))
			stopped = append(stopped, o)
			continue
		}
		d.log.Warn("container stopped: its files grew past its disk limit", "container", shortID(c.ID), "kind", kind,
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
