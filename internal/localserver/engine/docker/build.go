package docker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/strslice"
	docker "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/build"
)

// Build runs spec's steps (package build) in build containers of this
// engine and commits the result as an image, then prunes the layer cache.
// No build container outlives it.
func (d *Docker) Build(ctx context.Context, spec engine.BuildSpec) (*engine.BuildResult, error) {
	d.mu.Lock()
	d.built = true
	d.mu.Unlock()
	res, err := build.Run(ctx, buildEngine{d}, build.Options{ReadyTimeout: d.opts.ReadyTimeout, ReadyInterval: d.opts.ReadyInterval}, spec)
	if perr := d.layers.prune(ctx, d.opts.LayerCacheSize); perr != nil {
		d.log.Warn("prune the layer cache", "error", perr)
	}
	return res, err
}

// buildEngine is the build.Engine of a Docker engine.
type buildEngine struct{ d *Docker }

var _ build.Engine = buildEngine{}

func (e buildEngine) BaseImage(ctx context.Context, spec engine.BuildSpec, logf func(string, ...any)) (build.Image, error) {
	img, err := ensureImage(ctx, e.d.cli, spec, logf)
	if err != nil {
		return build.Image{}, err
	}
	if _, err := e.d.envd.For(ctx, spec.BaseImage); err != nil {
		return build.Image{}, err
	}
	out := build.Image{ID: img.ID, Env: map[string]string{}}
	if img.Config != nil {
		out.Workdir = img.Config.WorkingDir
		for _, kv := range img.Config.Env {
			if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
				out.Env[k] = v
			}
		}
	}
	return out, nil
}

func (e buildEngine) Start(ctx context.Context, spec engine.BuildSpec, from string, prepare func(context.Context, build.Container) error) (build.Container, error) {
	d := e.d
	base, err := d.cli.ImageInspect(ctx, spec.BaseImage)
	if err != nil {
		return nil, fmt.Errorf("inspect image %s: %w", spec.BaseImage, err)
	}
	fromImage := base
	if from != spec.BaseImage {
		if fromImage, err = d.cli.ImageInspect(ctx, from); err != nil {
			return nil, fmt.Errorf("inspect image %s: %w", from, err)
		}
	}
	c := &buildContainer{d: d, base: base, fromSize: fromImage.Size}
	var hook func(context.Context, string) error
	if prepare != nil {
		hook = func(ctx context.Context, containerID string) error {
			c.id = containerID
			return prepare(ctx, c)
		}
	}
	token := rand.Text()
	rc, err := d.startContainer(ctx, containerRequest{
		image:    from,
		kind:     kindBuild,
		id:       spec.BuildID,
		token:    token,
		labels:   d.labels.of(kindBuild, spec.TemplateID, spec.BuildID, ""),
		cpuCount: spec.CPUCount,
		memoryMB: spec.MemoryMB,
	}, hook)
	if err != nil {
		return nil, err
	}
	c.rc, c.id = rc, rc.id
	if err := rc.att.Init(ctx, client.InitRequest{AccessToken: token, DefaultUser: "root"}); err != nil {
		d.discard(ctx, rc)
		return nil, err
	}
	return c, nil
}

func (e buildEngine) CommitUnstarted(ctx context.Context, spec engine.BuildSpec, from, ref string) error {
	d := e.d
	base, err := d.cli.ImageInspect(ctx, spec.BaseImage)
	if err != nil {
		return fmt.Errorf("inspect image %s: %w", spec.BaseImage, err)
	}
	// Not on ctx, as in startContainer: a container that nothing records
	// must not be left by a cancel.
	createCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	created, err := d.cli.ContainerCreate(createCtx, &container.Config{
		Image: from, User: "0:0", Entrypoint: strslice.StrSlice{attach.EnvdPath},
		Labels: d.labels.of(kindBuild, spec.TemplateID, spec.BuildID, ""),
	}, hostConfig(engine.NetworkNone, d.runtime.Name, d.seccompOpt, false), nil, nil, "")
	cancel()
	if err != nil {
		return fmt.Errorf("create a container from %s: %w", from, err)
	}
	defer func() {
		if err := removeContainer(ctx, d.cli, created.ID); err != nil {
			d.log.Warn("container left behind", "container", attach.ShortID(created.ID), "error", err)
		}
	}()
	return commitImage(ctx, d.cli, nil, created.ID, ref, d.layers.config(base, kindImage, "", nil))
}

func (e buildEngine) ImageRef(templateID, buildID string) string {
	return imageRef(e.d.opts.ImageRepository, templateID, buildID)
}

func (e buildEngine) CacheScope() string { return e.d.opts.Instance }

func (e buildEngine) Layer(ctx context.Context, key string) ([]byte, bool, error) {
	return e.d.layers.cached(ctx, key)
}

func (e buildEngine) LayerRef(key string) string { return e.d.layers.ref(key) }

func (e buildEngine) TouchLayer(ctx context.Context, key string) { e.d.layers.touch(ctx, key) }

// buildContainer is the build.Container of a Docker build container. Its
// images keep the configuration of the build's base image.
type buildContainer struct {
	d        *Docker
	id       string
	rc       *runningContainer // nil until started
	base     image.InspectResponse
	fromSize int64
}

func (c *buildContainer) Envd() *client.Client { return c.rc.att.Envd() }

func (c *buildContainer) Shell(ctx context.Context) (attach.Shell, error) {
	return attach.FindShell(ctx, c.d.cli, c.id)
}

func (c *buildContainer) Exists(ctx context.Context, path string) (bool, error) {
	_, err := c.d.cli.ContainerStatPath(ctx, c.id, path)
	switch {
	case err == nil:
		return true, nil
	case isNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("looking for %s: %w", path, err)
}

func (c *buildContainer) CopyTo(ctx context.Context, dir string, content io.Reader) error {
	if c.rc == nil {
		return c.d.cli.CopyToContainer(ctx, c.id, dir, content, container.CopyToContainerOptions{})
	}
	return extractInside(ctx, c.d.cli, c.id, dir, content)
}

// attachment is the container's, nil before it runs.
func (c *buildContainer) attachment() *attach.Attachment {
	if c.rc == nil {
		return nil
	}
	return c.rc.att
}

func (c *buildContainer) CommitLayer(ctx context.Context, key string, state []byte) (int64, error) {
	if err := c.d.watch.withinFileLimit(ctx, c.id, c.d.opts.InodesPerSandbox); err != nil {
		return 0, err
	}
	ref := c.d.layers.ref(key)
	if err := commit(ctx, c.d.cli, c.attachment(), c.id, ref, c.d.layers.config(c.base, kindLayer, key, state)); err != nil {
		return 0, err
	}
	insp, err := c.d.cli.ImageInspect(ctx, ref)
	if err != nil {
		return 0, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	return insp.Size - c.fromSize, nil
}

func (c *buildContainer) CommitImage(ctx context.Context, ref string) error {
	if err := c.d.watch.withinFileLimit(ctx, c.id, c.d.opts.InodesPerSandbox); err != nil {
		return err
	}
	return commitImage(ctx, c.d.cli, c.attachment(), c.id, ref, c.d.layers.config(c.base, kindImage, "", nil))
}

func (c *buildContainer) Overrun(ctx context.Context) *engine.DiskOverrun {
	if o := c.rc.att.Overrun(); o != nil {
		return o
	}
	return c.d.quota.reached(ctx, c.id)
}

func (c *buildContainer) Remove(ctx context.Context) { c.d.discard(ctx, c.rc) }

// commitTimeout bounds a commit, which a cancel does not cut short.
const commitTimeout = 15 * time.Minute

// commit commits the container as the image ref with cfg, paused for the
// while, and its attachment a (nil for a container that never ran) frozen
// as long (Attachment.Freeze says why). A cancel does not cut it short:
// the engine goes on committing after its client has gone, and the removal
// of the container that followed raced that commit and left the container
// (exited) and the image behind, owned by no record (a build superseded
// while it saved its image).
func commit(ctx context.Context, cli *docker.Client, a *attach.Attachment, containerID, ref string, cfg *container.Config) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	committed := func() error {
		_, err := cli.ContainerCommit(ctx, containerID, container.CommitOptions{Reference: ref, Config: cfg, Pause: true})
		return err
	}
	var err error
	if a != nil {
		err = a.WhileFrozen(committed)
	} else {
		err = committed()
	}
	if err != nil {
		return fmt.Errorf("commit image %s: %w", ref, err)
	}
	return nil
}

// commitImage is commit for a build's image: a build cancelled while its
// image was committed fails, and the image goes, since no record will own
// it.
func commitImage(ctx context.Context, cli *docker.Client, a *attach.Attachment, containerID, ref string, cfg *container.Config) error {
	if err := commit(ctx, cli, a, containerID, ref, cfg); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return errors.Join(err, removeImage(context.WithoutCancel(ctx), cli, ref))
	}
	return nil
}
