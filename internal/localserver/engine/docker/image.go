package docker

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	docker "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// ensureImage makes sure ref exists locally, pulling it when allowed.
func ensureImage(ctx context.Context, cli *docker.Client, spec engine.BuildSpec, logf func(string, ...any)) (image.InspectResponse, error) {
	insp, err := cli.ImageInspect(ctx, spec.BaseImage)
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
	rc, err := cli.ImagePull(ctx, spec.BaseImage, image.PullOptions{RegistryAuth: auth})
	if err != nil {
		return insp, fmt.Errorf("pull image %s: %w", spec.BaseImage, err)
	}
	err = attach.ReadProgress(rc)
	rc.Close()
	if err != nil {
		return insp, fmt.Errorf("pull image %s: %w", spec.BaseImage, err)
	}
	insp, err = cli.ImageInspect(ctx, spec.BaseImage)
	if err != nil {
		return insp, fmt.Errorf("inspect image %s after pull: %w", spec.BaseImage, err)
	}
	return insp, nil
}

// registryAuth encodes fromImageRegistry credentials for the engine.
// Username/password registries and GCP (service-account JSON key) work;
// AWS needs an ECR token exchange the local server does not do.
func registryAuth(r *e2b.FromImageRegistry) (string, error) {
	if r == nil {
		return "", nil
	}
	var auth registry.AuthConfig
	switch r.Type {
	case "registry", "":
		auth = registry.AuthConfig{Username: r.Username, Password: r.Password}
	case "gcp":
		auth = registry.AuthConfig{Username: "_json_key", Password: r.ServiceAccountJSON}
	default:
		return "", fmt.Errorf("registry credentials of type %q are not supported by the local server", r.Type)
	}
	return registry.EncodeAuthConfig(auth)
}
