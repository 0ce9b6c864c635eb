package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	docker "github.com/docker/docker/client"
)

// layerStore keeps the layer cache's images (design/local-server.md,
// "Layer cache"): the layer of key is tagged <ImageRepository>-layer:<key>
// and carries in labels its kind, key and the state package build keeps
// with it (a label can only be overridden: the engine adds the
// container's labels, those of the layer it ran from included, to the
// image's).
type layerStore struct {
	cli        *docker.Client
	labels     labels
	repository string
	log        *slog.Logger
	// mu serialises prune.
	mu sync.Mutex
}

func (s *layerStore) ref(key string) string {
	return s.repository + "-layer:" + key
}

// config is the configuration of the layer image of key with state,
// or, for the build's image, kindImage without key and state.
func (s *layerStore) config(base image.InspectResponse, kind, key string, state []byte) *container.Config {
	return commitConfig(base, map[string]string{
		s.labels.key("kind"):        kind,
		s.labels.key("layer-key"):   key,
		s.labels.key("layer-state"): string(state),
	})
}

// cached returns the state kept with the layer image of key, when this
// instance has one.
func (s *layerStore) cached(ctx context.Context, key string) ([]byte, bool, error) {
	insp, err := s.cli.ImageInspect(ctx, s.ref(key))
	if isNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("inspect layer %s: %w", key, err)
	}
	if insp.Config == nil {
		return nil, false, nil
	}
	l := insp.Config.Labels
	if l[s.labels.key("instance")] != s.labels.instance || l[s.labels.key("kind")] != kindLayer || l[s.labels.key("layer-key")] != key {
		return nil, false, nil
	}
	return []byte(l[s.labels.key("layer-state")]), true, nil
}

// touch retags a layer image, which moves its LastTagTime, the clock of
// the LRU eviction.
func (s *layerStore) touch(ctx context.Context, key string) {
	if err := s.cli.ImageTag(ctx, s.ref(key), s.ref(key)); err != nil && !isNotFound(err) {
		s.log.Warn("touch layer", "key", key, "error", err)
	}
}

// prune removes this instance's layer images beyond the keep most
// recently used, and those that lost their tag (to a concurrent build of
// the same key, or a crash between commit and tag). An image a container
// still runs from, or that another image is built on, stays (its data
// does; the tag goes).
func (s *layerStore) prune(ctx context.Context, keep int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	images, err := s.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", s.labels.key("instance")+"="+s.labels.instance),
		filters.Arg("label", s.labels.key("kind")+"="+kindLayer),
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
		if err := removeImage(ctx, s.cli, ref); err != nil && !cerrdefs.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	for _, img := range images {
		var refs []string
		for _, r := range img.RepoTags {
			if strings.HasPrefix(r, s.repository+"-layer:") {
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
			if insp, err := s.cli.ImageInspect(ctx, l.id); err == nil && insp.Metadata.LastTagTime.After(l.used) {
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

// PruneLayers removes the instance's layer images beyond the keep most
// recently used (see prune).
func (d *Docker) PruneLayers(ctx context.Context, keep int) error {
	return d.layers.prune(ctx, keep)
}
