package docker

import (
	"context"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	docker "github.com/docker/docker/client"
)

// removalInProgress tells the engine's answer to a removal while another
// removal of the same container runs (a conflict, "removal of container …
// is already in progress"): a user's delete racing the server's own stop.
func removalInProgress(err error) bool {
	return cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress")
}

// awaitRemoval waits until the engine has removed the container that
// another removal is removing, so that both removals succeed.
func awaitRemoval(ctx context.Context, cli *docker.Client, containerID string) error {
	waited, failed := cli.ContainerWait(ctx, containerID, container.WaitConditionRemoved)
	select {
	case <-waited:
		return nil
	case err := <-failed:
		return err
	}
}
