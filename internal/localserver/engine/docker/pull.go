package docker

import (
	"fmt"

	"github.com/docker/docker/api/types/registry"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// registryAuth encodes fromImageRegistry credentials for the engine.
// Username/password registries and GCP (service-account JSON key) work;
// AWS needs an ECR token exchange the local server does not do.
func registryAuth(r *e2bapi.FromImageRegistry) (string, error) {
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
