package engine

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/image"
)

// ensureImage makes sure ref exists locally, pulling it when allowed.
func (d *Docker) ensureImage(ctx context.Context, spec BuildSpec, logf func(string, ...any)) (image.InspectResponse, error) {
	insp, err := d.cli.ImageInspect(ctx, spec.BaseImage)
	if err == nil {
		return insp, nil
	}
	if !isNotFound(err) {
		return insp, fmt.Errorf("inspect image %s: %w", spec.BaseImage, err)
	}
	if !spec.PullBase {
		return insp, fmt.Errorf("image %s is not present on the Docker engine", spec.BaseImage)
	}
	logf("Pulling image %s", spec.BaseImage)
	auth, err := registryAuth(spec.RegistryAuth)
	if err != nil {
		return insp, err
	}
	rc, err := d.cli.ImagePull(ctx, spec.BaseImage, image.PullOptions{RegistryAuth: auth})
	if err != nil {
		return insp, fmt.Errorf("pull image %s: %w", spec.BaseImage, err)
	}
	err = readPullProgress(rc)
	rc.Close()
	if err != nil {
		return insp, fmt.Errorf("pull image %s: %w", spec.BaseImage, err)
	}
	insp, err = d.cli.ImageInspect(ctx, spec.BaseImage)
	if err != nil {
		return insp, fmt.Errorf("inspect image %s after pull: %w", spec.BaseImage, err)
	}
	return insp, nil
}
