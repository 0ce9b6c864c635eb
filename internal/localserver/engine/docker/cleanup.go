package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	docker "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// RemoveOrphans removes this instance's build containers and the sandbox
// containers keep does not claim. The kept sandboxes are attached again:
// their channel opens when first needed. Then it removes this instance's
// build images (in ImageRepository, or untagged) that keepImage does not
// claim, envd volumes this server does not use and no container mounts,
// envd images that no container uses, and prunes the layer cache (PruneLayers). Meant for start-up: builds running
// at the time are aborted.
func (d *Docker) RemoveOrphans(ctx context.Context, keep func(sandboxID string) bool, keepImage func(ref string) bool) error {
	list, err := d.labels.list(ctx, d.cli)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, c := range list {
		kind, id, orphaned := d.labels.orphaned(c, keep)
		switch {
		case kind == kindSandbox && !orphaned:
			d.reattach(c, id)
		case orphaned:
			d.log.Info("removing orphaned container", "container", attach.ShortID(c.ID), "kind", kind, "id", id)
			d.channels.Detach(attach.Key(kind, id))
			errs = append(errs, removeContainer(ctx, d.cli, c.ID))
		}
	}
	errs = append(errs, removeOrphanImages(ctx, d.cli, d.labels, d.opts.ImageRepository, d.log, keepImage, d.awaited.add), d.envd.Remove(ctx, true), d.layers.prune(ctx, d.opts.LayerCacheSize))
	return errors.Join(errs...)
}

// orphaned tells the kind of c and the build or sandbox it served, and
// whether it is a container of ours that keep does not claim: a build
// container (no build outlives its server's run) or a sandbox container
// whose sandbox keep does not name. The envd volume's holder and
// containers started by hand from a build's image (they carry its labels)
// are neither.
func (l labels) orphaned(c container.Summary, keep func(sandboxID string) bool) (kind, id string, orphaned bool) {
	kind = c.Labels[l.key("kind")]
	switch kind {
	case kindBuild:
		return kind, c.Labels[l.key("build-id")], true
	case kindSandbox:
		id = c.Labels[l.key("sandbox-id")]
		return kind, id, keep == nil || !keep(id)
	}
	return kind, "", false
}

// removeOrphanImages removes the images this instance committed (their
// labels say so) that keep does not claim: by tag within ImageRepository
// (other tags someone gave them are left alone), by ID when untagged. An
// image that child images still need loses its tag and stays for them;
// one a container still runs from is handed to inUse, when given.
func removeOrphanImages(ctx context.Context, cli *docker.Client, l labels, repository string, log *slog.Logger, keep func(ref string) bool, inUse func(ref string)) error {
	images, err := cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", l.key("instance")+"="+l.instance),
		filters.Arg("label", l.key("kind")+"="+kindImage),
	)})
	if err != nil {
		return fmt.Errorf("list images: %w", err)
	}
	var errs []error
	for _, img := range images {
		refs := img.RepoTags
		if len(refs) == 0 {
			refs = []string{img.ID}
		}
		for _, ref := range refs {
			ours := ref == img.ID || strings.HasPrefix(ref, repository+"/")
			if !ours || (keep != nil && keep(ref)) {
				continue
			}
			log.Info("removing orphaned image", "image", ref)
			err := removeImage(ctx, cli, ref)
			switch {
			case cerrdefs.IsConflict(err):
				if inUse != nil {
					inUse(ref)
				}
			case err != nil:
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// RemoveImage removes a build's image; a missing image is not an error.
// An image a container still runs from (a build from the deleted
// template) goes when the last such container does:
// the engine refuses to remove it meanwhile, and a forced removal would
// only take its tag, leaving the image to no one.
func (d *Docker) RemoveImage(ctx context.Context, ref string) error {
	err := removeImage(ctx, d.cli, ref)
	if cerrdefs.IsConflict(err) {
		d.log.Info("image kept until the containers running from it end", "image", ref)
		d.awaited.add(ref)
		return nil
	}
	return err
}

func removeImage(ctx context.Context, cli *docker.Client, ref string) error {
	_, err := cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}

// reattach gives a sandbox container kept from an earlier run of the
// server its attachment again; the channel opens when first needed.
func (d *Docker) reattach(c container.Summary, sandboxID string) {
	network := c.Labels[d.labels.key("network")]
	if network == "" {
		network = engine.NetworkHost // containers of servers before the label
	}
	a := d.channels.Attach(attach.Key(kindSandbox, sandboxID), c.ID, network, time.Time{})
	if c.State == "paused" {
		a.Freeze()
	}
}
