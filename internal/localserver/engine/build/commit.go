package build

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// commitLayer commits the phase's container as the layer of key, with
// what the next phase inherits.
func (b *builder) commitLayer(ctx context.Context, key string) error {
	state, err := json.Marshal(layerState{User: b.user, Workdir: b.workdir, Env: b.env, Shell: b.sh.Path, Login: b.sh.Login})
	if err != nil {
		return err
	}
	grown, err := b.c.CommitLayer(ctx, key, state)
	if err != nil {
		return err
	}
	if grown > restartAfter {
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

// ensureAccountFiles gives images without /etc/passwd (minimal busybox
// root file systems) the root account envd needs to resolve users, before
// envd starts.
func (b *builder) ensureAccountFiles(ctx context.Context, c Container) error {
	files := map[string]string{ //nolint:gosec // the passwd line of root with no password ("x"), not a credential
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":  "root:x:0:\n",
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"etc/passwd", "etc/group"} {
		if ok, err := c.Exists(ctx, "/"+name); err == nil && ok {
			continue
		}
		b.logf(stepBase, e2bapi.LogInfo, "The image has no /%s: adding one with root", name)
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
	if err := c.CopyTo(ctx, "/", &buf); err != nil {
		return fmt.Errorf("adding account files: %w", err)
	}
	return nil
}

func copyEnv(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	maps.Copy(out, m)
	return out
}
