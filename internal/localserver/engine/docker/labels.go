package docker

import (
	"context"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	docker "github.com/docker/docker/client"
)

// Kinds of containers, the value of the <prefix>.kind label. Build images
// carry kindImage and the layer cache's images kindLayer, which containers
// we create override.
const (
	kindBuild   = "build"
	kindSandbox = "sandbox"
	kindImage   = "image"
	kindLayer   = "layer"
)

// labels are the labels that mark a server's containers and images: the
// server's label prefix and instance.
type labels struct {
	prefix, instance string
}

func (l labels) key(name string) string { return l.prefix + "." + name }

// of marks a container as ours: its kind and the IDs it belongs to.
func (l labels) of(kind, templateID, buildID, sandboxID string) map[string]string {
	m := map[string]string{
		l.key("instance"):    l.instance,
		l.key("kind"):        kind,
		l.key("template-id"): templateID,
		l.key("build-id"):    buildID,
	}
	if sandboxID != "" {
		m[l.key("sandbox-id")] = sandboxID
	}
	return m
}

// list returns the instance's containers matching extra filters.
func (l labels) list(ctx context.Context, cli *docker.Client, extra ...filters.KeyValuePair) ([]container.Summary, error) {
	args := filters.NewArgs(append(extra, filters.Arg("label", l.key("instance")+"="+l.instance))...)
	return cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
}
