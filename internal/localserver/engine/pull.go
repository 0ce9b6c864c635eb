package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/docker/docker/api/types/registry"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

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

// readPullProgress drains an image pull's JSON progress stream and
// returns the error the engine reports in it, if any.
func readPullProgress(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if msg.ErrorDetail.Message != "" {
			return errors.New(msg.ErrorDetail.Message)
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}
