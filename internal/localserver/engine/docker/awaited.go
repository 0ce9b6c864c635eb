package docker

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	docker "github.com/docker/docker/client"
)

// awaitedImages are the images of deleted templates that a container still
// ran from when their template went (Docker.RemoveImage): each is removed
// once no container runs from it.
type awaitedImages struct {
	cli *docker.Client
	log *slog.Logger

	mu   sync.Mutex
	refs map[string]bool
}

func newAwaitedImages(cli *docker.Client, log *slog.Logger) *awaitedImages {
	return &awaitedImages{cli: cli, log: log, refs: map[string]bool{}}
}

// add remembers an image to remove once no container runs from it.
func (a *awaitedImages) add(ref string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refs[ref] = true
}

// removeUnused removes the awaited images no container runs from any
// more; called after the server removes a container. A server stopped
// first leaves them to the next start's clean-up (RemoveOrphans) or to
// `server prune`, which find them unowned.
func (a *awaitedImages) removeUnused(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	a.mu.Lock()
	refs := slices.Collect(maps.Keys(a.refs))
	a.mu.Unlock()
	for _, ref := range refs {
		err := removeImage(ctx, a.cli, ref)
		if cerrdefs.IsConflict(err) {
			continue
		}
		a.mu.Lock()
		delete(a.refs, ref)
		a.mu.Unlock()
		if err != nil {
			a.log.Warn("remove an image whose containers ended", "image", ref, "err", err)
			continue
		}
		a.log.Info("image removed: its last container ended", "image", ref)
	}
}
