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
		kind, id := c.Labels[d.labels.key("kind")], ""
		switch kind {
		case kindBuild:
			id = c.Labels[d.labels.key("build-id")]
		case kindSandbox:
			id = c.Labels[d.labels.key("sandbox-id")]
		default:
			continue // the envd volume's, or started by hand from a build's image
		}
		if kind == kindSandbox && keep != nil && keep(id) {
			d.reattach(c, id)
			continue
		}
		d.log.Info("removing orphaned container", "container", attach.ShortID(c.ID), "kind", kind, "id", id)
		d.channels.Detach(attach.Key(kind, id))
		errs = append(errs, removeContainer(ctx, d.cli, c.ID))
	}
	errs = append(errs, removeOrphanImages(ctx, d.cli, d.labels, d.opts.ImageRepository, d.log, keepImage), d.envd.Remove(ctx, true), d.layers.prune(ctx, d.opts.LayerCacheSize))
	return errors.Join(errs...)
}

// removeOrphanImages removes the images this instance committed (their
// labels say so) that keep does not claim: by tag within ImageRepository
// (other tags someone gave them are left alone), by ID when untagged. An
// image that child images still need loses its tag and stays for them.
func removeOrphanImages(ctx context.Context, cli *docker.Client, l labels, repository string, log *slog.Logger, keep func(ref string) bool) error {
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
			if err := removeImage(ctx, cli, ref); err != nil && !cerrdefs.IsConflict(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// RemoveImage removes a build's image; a missing image is not an error.
func (d *Docker) RemoveImage(ctx context.Context, ref string) error {
	return removeImage(ctx, d.cli, ref)
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

// RemoveInstanceImages removes every image of the server instance on the
// engine at dockerHost, its layer cache and envd volume included: what
// tests do when their server's data dir goes (a server keeps its cache
// across restarts).
func RemoveInstanceImages(ctx context.Context, dockerHost, instance string) error {
	cli, err := docker.NewClientWithOpts(docker.WithHost(dockerHost), docker.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer cli.Close()
	l := labels{prefix: defaultLabelPrefix, instance: instance}
	log := slog.New(slog.DiscardHandler)
	layers := &layerStore{cli: cli, labels: l, repository: defaultImageRepository, log: log}
	envdVolumes := attach.RemovableVolumes(cli, defaultLabelPrefix, instance)
	// Build images first: the layers under them go with the last tag.
	return errors.Join(removeOrphanImages(ctx, cli, l, defaultImageRepository, log, nil), layers.prune(ctx, 0), envdVolumes.Remove(ctx, false))
}
