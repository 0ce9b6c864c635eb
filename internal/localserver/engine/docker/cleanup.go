package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
)

// list returns this instance's containers matching extra filters.
func (d *Docker) list(ctx context.Context, extra ...filters.KeyValuePair) ([]container.Summary, error) {
	args := filters.NewArgs(append(extra, filters.Arg("label", d.label("instance")+"="+d.opts.Instance))...)
	return d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
}

// RemoveOrphans removes this instance's build containers and the sandbox
// containers keep does not claim. The kept sandboxes are attached again:
// their channel opens when first needed. Then it removes this instance's
// build images (in ImageRepository, or untagged) that keepImage does not
// claim, envd volumes this server does not use and no container mounts,
// envd images that no container uses, and prunes the layer cache (PruneLayers). Meant for start-up: builds running
// at the time are aborted.
func (d *Docker) RemoveOrphans(ctx context.Context, keep func(sandboxID string) bool, keepImage func(ref string) bool) error {
	list, err := d.list(ctx)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, c := range list {
		kind, id := c.Labels[d.label("kind")], ""
		switch kind {
		case kindBuild:
			id = c.Labels[d.label("build-id")]
		case kindSandbox:
			id = c.Labels[d.label("sandbox-id")]
		default:
			continue // the envd volume's, or started by hand from a build's image
		}
		if kind == kindSandbox && keep != nil && keep(id) {
			d.reattach(c, id)
			continue
		}
		d.log.Info("removing orphaned container", "container", shortID(c.ID), "kind", kind, "id", id)
		d.detach(attachKey(kind, id))
		errs = append(errs, d.removeContainer(ctx, c.ID))
	}
	errs = append(errs, d.removeOrphanImages(ctx, keepImage), d.removeEnvdVolumes(ctx, true), d.PruneLayers(ctx, d.opts.LayerCacheSize))
	return errors.Join(errs...)
}

// removeOrphanImages removes the images this instance committed (their
// labels say so) that keep does not claim: by tag within ImageRepository
// (other tags someone gave them are left alone), by ID when untagged. An
// image that child images still need loses its tag and stays for them.
func (d *Docker) removeOrphanImages(ctx context.Context, keep func(ref string) bool) error {
	images, err := d.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", d.label("instance")+"="+d.opts.Instance),
		filters.Arg("label", d.label("kind")+"="+kindImage),
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
			ours := ref == img.ID || strings.HasPrefix(ref, d.opts.ImageRepository+"/")
			if !ours || (keep != nil && keep(ref)) {
				continue
			}
			d.log.Info("removing orphaned image", "image", ref)
			if err := d.RemoveImage(ctx, ref); err != nil && !cerrdefs.IsConflict(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// RemoveImage removes a build's image; a missing image is not an error.
func (d *Docker) RemoveImage(ctx context.Context, ref string) error {
	_, err := d.cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}
