package docker

import (
	"context"
	"fmt"
	"strconv"

	"github.com/docker/docker/api/types/container"
	docker "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// diskLimitLabel carries a container's disk limit in MiB, so that the
// limit it was created with holds across server restarts and flag changes.
const diskLimitLabel = "disk-limit-mb"

// diskQuota is how the engine bounds a container's files, found at start
// (probeDiskQuota).
type diskQuota struct {
	cli    *docker.Client
	labels labels
	// sizeMB is the disk limit (--disk-size-mb); at most 0: none.
	sizeMB int
	// limit is engine.DiskLimitHard, engine.DiskLimitWatchdog or
	// engine.DiskLimitNone.
	limit string
	// includesImage: the storage driver counts the image's files in a
	// container's quota (btrfs qgroups count what a subvolume refers
	// to); overlay2's project quota counts only the writable layer.
	includesImage bool
}

// probeDiskQuota finds whether the engine's storage driver takes a size
// (StorageOpt size: overlay2 on xfs mounted with pquota, btrfs, zfs), so
// that writes past a container's disk limit fail (ENOSPC or EDQUOT) where
// the watchdog (EnforceDiskLimits) only stops it after the fact and misses
// space held by deleted files still open. It creates, never starts, a
// container of image with the limit as its size: an engine that cannot
// refuses to create it. The image is envd's, which every engine has.
func (d *Docker) probeDiskQuota(ctx context.Context, driver string) (diskQuota, error) {
	q := diskQuota{cli: d.cli, labels: d.labels, sizeMB: d.opts.DiskSizeMB, limit: engine.DiskLimitNone}
	if q.sizeMB <= 0 {
		return q, nil
	}
	holderID, _, err := d.envd.ForEngine(ctx)
	if err != nil {
		return diskQuota{}, err
	}
	holder, err := d.cli.ContainerInspect(ctx, holderID)
	if err != nil {
		return diskQuota{}, fmt.Errorf("inspect the envd volume's holder: %w", err)
	}
	hc := hostConfig(engine.NetworkNone, "", d.seccompOpt, false)
	hc.StorageOpt = storageSize(int64(d.opts.DiskSizeMB) << 20)
	created, err := d.cli.ContainerCreate(ctx, &container.Config{
		Image: holder.Config.Image, Entrypoint: []string{attach.EnvdPath},
		Labels: d.labels.of(kindSelfTest, "", "", ""),
	}, hc, nil, nil, "")
	if err != nil {
		d.log.Info("the engine gives containers no hard disk limit: a watchdog stops those that grow past it", "driver", driver, "engine_says", err.Error())
		q.limit = engine.DiskLimitWatchdog
		return q, nil
	}
	if err := removeContainer(ctx, d.cli, created.ID); err != nil {
		return diskQuota{}, err
	}
	q.limit, q.includesImage = engine.DiskLimitHard, driver == "btrfs"
	return q, nil
}

// storageOpt is the storage options of a container of image: its hard
// disk limit, less the image where the driver counts only the writable
// layer. Nil without a hard limit.
func (q diskQuota) storageOpt(ctx context.Context, image string) (map[string]string, error) {
	if q.limit != engine.DiskLimitHard {
		return nil, nil
	}
	size := int64(q.sizeMB) << 20
	if !q.includesImage {
		img, err := q.cli.ImageInspect(ctx, image)
		if err != nil {
			return nil, fmt.Errorf("inspect image %s: %w", image, err)
		}
		size -= img.Size
	}
	// Less than a MiB to write is no disk a container can use.
	if size < 1<<20 {
		return nil, fmt.Errorf("image %s fills the disk limit of %d MiB (--disk-size-mb)", image, q.sizeMB)
	}
	return storageSize(size), nil
}

// reached is the overrun of a build container whose files reached its
// hard disk limit (so that the step that failed at it says so), nil when
// they did not or the limit is not hard. The engine measures files, the
// quota blocks and the file system's own records: within quotaSlack of
// the limit counts as reached.
func (q diskQuota) reached(ctx context.Context, containerID string) *engine.DiskOverrun {
	if q.limit != engine.DiskLimitHard {
		return nil
	}
	// Unmeasured (the engine failed to answer), the step's own error
	// stands alone.
	insp, _, err := q.cli.ContainerInspectWithRaw(ctx, containerID, true)
	limit := int64(q.sizeMB) << 20
	if err == nil && insp.SizeRootFs != nil && *insp.SizeRootFs+quotaSlack(limit) >= limit {
		return &engine.DiskOverrun{BuildID: insp.Config.Labels[q.labels.key("build-id")], Used: *insp.SizeRootFs, Limit: limit, Hard: true}
	}
	return nil
}

// quotaSlack is how far below its hard limit a container's measured files
// may stay when its writes failed at it: 4 MiB or 1/64 of the limit.
func quotaSlack(limit int64) int64 {
	return max(4<<20, limit/64)
}

func storageSize(bytes int64) map[string]string {
	return map[string]string{"size": strconv.FormatInt(bytes, 10)}
}

// EnforceDiskLimits stops (SIGKILL) every running container of this
// server whose writable layer holds more files than its file limit
// (--inodes-per-sandbox), whatever the disk limit, or, where the engine
// gives no hard disk limit (probeDiskQuota), whose file system grew past
// its disk limit, as the engine measures it (the writable layer and the
// image below it) plus the space its deleted files still open hold. Each
// container is measured in the background (fileWatch), so it returns the
// sandboxes stopped since the last call, for the server to stop and
// report; a build container's running step fails with the overrun as its
// error. A writer can pass a limit by what it writes between two
// measures.
func (d *Docker) EnforceDiskLimits(ctx context.Context) ([]engine.DiskOverrun, error) {
	return d.watch.pass(ctx)
}

// diskLimit parses a disk limit label into bytes; 0 when absent or bad.
func diskLimit(label string) int64 {
	mb, err := strconv.ParseInt(label, 10, 32)
	if err != nil || mb <= 0 {
		return 0
	}
	return mb << 20
}
