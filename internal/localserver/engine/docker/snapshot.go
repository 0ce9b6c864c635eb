package docker

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/strslice"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// imageRef is the image of a template's build: <repo>/<templateID>:<buildID>.
func imageRef(repository, templateID, buildID string) string {
	return fmt.Sprintf("%s/%s:%s", repository, strings.ToLower(templateID), strings.ToLower(buildID))
}

// commitConfig is the configuration of an image committed from one of our
// containers: the base image's user, command, entrypoint and labels (not
// envd, the container's entrypoint), plus labels, which override the
// container's own (the engine merges those in).
func commitConfig(base image.InspectResponse, labels map[string]string) *container.Config {
	cfg := &container.Config{
		// A non-nil empty entrypoint stops the engine from filling in the
		// container's (envd) when the image has none.
		Entrypoint: strslice.StrSlice{},
		Labels:     map[string]string{},
	}
	if c := base.Config; c != nil {
		cfg.User, cfg.Cmd = c.User, c.Cmd
		maps.Copy(cfg.Labels, c.Labels)
		if len(c.Entrypoint) > 0 {
			cfg.Entrypoint = c.Entrypoint
		}
	}
	maps.Copy(cfg.Labels, labels)
	return cfg
}

// CommitSandbox commits the sandbox's file system, paused for the while, as
// the image of a template's build and returns its reference. The image
// says it is ours and whose build it is, and belongs to no sandbox: a
// container started from it must not pass for the source sandbox's.
func (d *Docker) CommitSandbox(ctx context.Context, spec engine.SnapshotSpec) (string, error) {
	id, err := d.sandboxContainer(ctx, spec.SandboxID)
	if err != nil {
		return "", err
	}
	base, err := d.cli.ImageInspect(ctx, spec.Image)
	if err != nil {
		return "", fmt.Errorf("inspect image %s: %w", spec.Image, err)
	}
	ref := imageRef(d.opts.ImageRepository, spec.TemplateID, spec.BuildID)
	cfg := commitConfig(base, map[string]string{
		d.labels.key("kind"):        kindImage,
		d.labels.key("template-id"): spec.TemplateID,
		d.labels.key("build-id"):    spec.BuildID,
		d.labels.key("sandbox-id"):  "",
	})
	if err := commit(ctx, d.cli, d.channels.Get(attach.Key(kindSandbox, spec.SandboxID)), id, ref, cfg); err != nil {
		return "", fmt.Errorf("snapshot of sandbox %s: %w", spec.SandboxID, err)
	}
	return ref, nil
}
