package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	docker "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// The layer cache (design/local-server.md, "Layer cache"): every phase of a
// build (the default user, each step) runs in a container of its own,
// started from the previous phase's image, and is committed as an image
// tagged <ImageRepository>-layer:<key>. The key chains the previous key with
// what the phase does, as E2B's hashKeys do, so a rebuild whose first
// phases are unchanged starts from the image of the last of them.

// layerCacheVersion changes when what a phase does for the same inputs
// changes (the helper scripts are hashed on their own), so that images of
// older servers are not reused.
const layerCacheVersion = "1"

// DefaultLayerCacheSize is how many layer images a server keeps.
const DefaultLayerCacheSize = 100

// hashKeys is E2B's cache key: sha256 of base and the keys, each after a ";".
func hashKeys(base string, keys ...string) string {
	h := sha256.New()
	h.Write([]byte(base))
	for _, k := range keys {
		h.Write([]byte(";"))
		h.Write([]byte(k))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// baseKey is the key of the image a build starts from. It names the image
// by ID, so a base retagged or pulled anew is a different base, and holds
// the server's instance, so servers sharing an engine keep caches apart.
func (d *Docker) baseKey(imageID string) string {
	return hashKeys(layerCacheVersion, d.opts.Instance, ensureUserScript, mkdirOwnedScript, placeScript, "image:"+imageID)
}

// stepKey chains a step onto the key before it. The arguments go in as
// JSON, not joined with spaces as on E2B: ["echo a b"] and ["echo a", "b"]
// (the same command as user b) must not share a key.
func stepKey(prev string, st e2b.TemplateStep) string {
	args, _ := json.Marshal(st.Args) // a []string always marshals
	return hashKeys(prev, st.Type, string(args), st.FilesHash)
}

// defaultUserKey is the key of the implicit `USER user true` phase.
func defaultUserKey(base string) string {
	return hashKeys(base, "DEFAULT USER", defaultUser)
}

// layerState is what a phase leaves for the next besides its files; each
// layer image carries it in a label.
type layerState struct {
	User    string            `json:"user"`
	Workdir string            `json:"workdir"`
	Env     map[string]string `json:"env"`
	// Shell is how commands run, chosen once per chain (a RUN that installs
	// bash does not change it, in a fresh build or a cached one).
	Shell string `json:"shell,omitempty"`
	Login bool   `json:"login,omitempty"`
}

func (d *Docker) layerRef(key string) string {
	return d.opts.ImageRepository + "-layer:" + key
}

// cachedLayer returns the state of the layer image of key, when this
// instance has one.
func (d *Docker) cachedLayer(ctx context.Context, key string) (layerState, bool, error) {
	var st layerState
	insp, err := d.cli.ImageInspect(ctx, d.layerRef(key))
	if isNotFound(err) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("inspect layer %s: %w", key, err)
	}
	if insp.Config == nil {
		return st, false, nil
	}
	l := insp.Config.Labels
	if l[d.label("instance")] != d.opts.Instance || l[d.label("kind")] != kindLayer || l[d.label("layer-key")] != key {
		return st, false, nil
	}
	if err := json.Unmarshal([]byte(l[d.label("layer-state")]), &st); err != nil || st.User == "" {
		return st, false, nil //nolint:nilerr // a layer with a bad label is not a cache hit
	}
	return st, true, nil
}

// touchLayer retags a layer image, which moves its LastTagTime, the clock
// of the LRU eviction.
func (d *Docker) touchLayer(ctx context.Context, key string) {
	if err := d.cli.ImageTag(ctx, d.layerRef(key), d.layerRef(key)); err != nil && !isNotFound(err) {
		d.log.Warn("touch layer", "key", key, "error", err)
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
	d := &Docker{cli: cli, log: slog.New(slog.DiscardHandler), opts: DockerOptions{
		Instance: instance, LabelPrefix: defaultLabelPrefix, ImageRepository: defaultImageRepository,
	}}
	// Build images first: the layers under them go with the last tag.
	return errors.Join(d.removeOrphanImages(ctx, nil), d.PruneLayers(ctx, 0), d.removeEnvdVolumes(ctx, false))
}

// PruneLayers removes this instance's layer images beyond the keep most
// recently used, and those that lost their tag (to a concurrent build of
// the same key, or a crash between commit and tag). An image a container
// still runs from, or that another image is built on, stays (its data
// does; the tag goes).
func (d *Docker) PruneLayers(ctx context.Context, keep int) error {
	d.pruneMu.Lock()
	defer d.pruneMu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	images, err := d.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", d.label("instance")+"="+d.opts.Instance),
		filters.Arg("label", d.label("kind")+"="+kindLayer),
	)})
	if err != nil {
		return fmt.Errorf("list layers: %w", err)
	}
	type tagged struct {
		ref, id string
		used    time.Time
	}
	var layers []tagged
	var errs []error
	remove := func(ref string) {
		if err := d.RemoveImage(ctx, ref); err != nil && !cerrdefs.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	for _, img := range images {
		var refs []string
		for _, r := range img.RepoTags {
			if strings.HasPrefix(r, d.opts.ImageRepository+"-layer:") {
				refs = append(refs, r)
			}
		}
		if len(refs) == 0 {
			if len(img.RepoTags) == 0 || slices.Equal(img.RepoTags, []string{"<none>:<none>"}) {
				remove(img.ID)
			}
			continue
		}
		for _, r := range refs {
			layers = append(layers, tagged{r, img.ID, time.Unix(img.Created, 0)})
		}
	}
	if keep < 0 {
		keep = 0
	}
	if len(layers) > keep {
		// The list has no LastTagTime: inspect, only when some must go.
		for i, l := range layers {
			if insp, err := d.cli.ImageInspect(ctx, l.id); err == nil && insp.Metadata.LastTagTime.After(l.used) {
				layers[i].used = insp.Metadata.LastTagTime
			}
		}
		slices.SortFunc(layers, func(a, b tagged) int { return b.used.Compare(a.used) })
		for _, l := range layers[keep:] {
			remove(l.ref)
		}
	}
	return errors.Join(errs...)
}
