package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/strslice"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// imageConfig is the configuration of the build's images (commitConfig)
// with the kind label and the layer cache's labels (key and state, empty
// but for layers: the engine adds the container's labels, those of the
// layer it ran from included, to the image's, and a label can only be
// overridden). A container someone starts from the image by hand is not
// ours to remove.
func (b *builder) imageConfig(kind, key string, state []byte) *container.Config {
	return commitConfig(b.base, map[string]string{
		b.d.label("kind"):        kind,
		b.d.label("layer-key"):   key,
		b.d.label("layer-state"): string(state),
	})
}

// commitLayer commits the phase's container as the layer of key, with
// what the next phase inherits.
func (b *builder) commitLayer(ctx context.Context, key string) error {
	state, err := json.Marshal(layerState{User: b.user, Workdir: b.workdir, Env: b.env, Shell: b.sh.path, Login: b.sh.login})
	if err != nil {
		return err
	}
	ref := b.d.layerRef(key)
	if err := b.commit(ctx, b.c.id, ref, b.imageConfig(kindLayer, key, state)); err != nil {
		return err
	}
	insp, err := b.d.cli.ImageInspect(ctx, ref)
	if err != nil {
		return fmt.Errorf("inspect image %s: %w", ref, err)
	}
	if insp.Size-b.fromSize > restartAfter {
		b.endPhase(ctx) // the next phase starts from this layer
	}
	return nil
}

// restartAfter is how far a build container's changes may grow before the
// next phase gets a fresh container from the last layer: a commit holds
// everything the container changed since it started, so small phases
// share a container (a commit and no start each) while a large one is
// committed once.
const restartAfter = 64 << 20

func (b *builder) commit(ctx context.Context, containerID, ref string, cfg *container.Config) error {
	if _, err := b.d.cli.ContainerCommit(ctx, containerID, container.CommitOptions{Reference: ref, Config: cfg, Pause: true}); err != nil {
		return fmt.Errorf("commit image %s: %w", ref, err)
	}
	return nil
}

// commitUnstarted commits the image from as ref with the build's labels
// and image configuration through a container that is created, never
// started: its only layer is empty.
func (b *builder) commitUnstarted(ctx context.Context, from, ref string) error {
	// Not on ctx, as in startContainer: a container that nothing records
	// must not be left by a cancel.
	createCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	created, err := b.d.cli.ContainerCreate(createCtx, &container.Config{
		Image: from, User: "0:0", Entrypoint: strslice.StrSlice{containerEnvdPath},
		Labels: b.d.labels(kindBuild, b.spec.TemplateID, b.spec.BuildID, ""),
	}, b.d.hostConfig(NetworkNone, b.d.runtime.Name), nil, nil, "")
	cancel()
	if err != nil {
		return fmt.Errorf("create a container from %s: %w", from, err)
	}
	defer func() {
		if err := b.d.removeContainer(ctx, created.ID); err != nil {
			b.d.log.Warn("container left behind", "container", shortID(created.ID), "error", err)
		}
	}()
	return b.commit(ctx, created.ID, ref, b.imageConfig(kindImage, "", nil))
}

// ensureAccountFiles gives images without /etc/passwd (minimal busybox
// root file systems) the root account envd needs to resolve users, before
// envd starts.
func (b *builder) ensureAccountFiles(ctx context.Context, containerID string) error {
	files := map[string]string{ //nolint:gosec // the passwd line of root with no password ("x"), not a credential
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":  "root:x:0:\n",
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"etc/passwd", "etc/group"} {
		if _, err := b.d.cli.ContainerStatPath(ctx, containerID, "/"+name); err == nil {
			continue
		}
		b.logf(stepBase, e2b.LogInfo, "The image has no /%s: adding one with root", name)
		content := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg, ModTime: time.Now()}); err != nil {
			return err
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if buf.Len() <= 1024 { // only the end-of-archive blocks: nothing to add
		return nil
	}
	if err := b.d.cli.CopyToContainer(ctx, containerID, "/", &buf, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("adding account files: %w", err)
	}
	return nil
}

// imageEnv is the image's configured environment as a map.
func imageEnv(img image.InspectResponse) map[string]string {
	env := map[string]string{}
	if img.Config == nil {
		return env
	}
	for _, kv := range img.Config.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	return env
}

func copyEnv(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
