package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	docker "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// Kinds of Object, as `server prune` prints them.
const (
	ObjectSandbox = "sandbox container"
	ObjectBuild   = "build container"
	ObjectEnvd    = "envd volume"
	ObjectImage   = "template image"
	ObjectLayer   = "layer image"
)

// Object is one thing a server instance keeps on its engine.
type Object struct {
	// Kind is one of the Object… kinds.
	Kind string
	// Name is an image's tags (its ID when untagged) or a container's
	// short ID with the sandbox or build it serves.
	Name string
	// ID is the engine's ID of the container or image.
	ID string
	// Size is the engine's measure in bytes: a container's writable layer,
	// an image's layers (those it shares with other images included); -1
	// for an envd volume, which the engine does not measure cheaply (a
	// copy of this binary).
	Size int64
	// Unique is the part of Size no other image shares: what removing
	// this object alone frees.
	Unique int64
}

// PruneOptions say which engine and server instance Prune cleans, and
// what of it records still own.
type PruneOptions struct {
	// DockerHost is the engine's address; empty: DOCKER_HOST, else the
	// default socket.
	DockerHost string
	// Instance is the server instance (DockerOptions.Instance).
	Instance string
	// KeepSandbox and KeepImage claim the sandbox containers and build
	// images that records own; nil claims none.
	KeepSandbox func(sandboxID string) bool
	KeepImage   func(ref string) bool
}

// PruneReport is what Prune did.
type PruneReport struct {
	// Removed are the objects gone, Kept those left: claimed, in use by a
	// kept container, or failed to remove (the error says).
	Removed, Kept []Object
	// Freed is how much the engine's image layers shrank plus the removed
	// containers' writable layers, in bytes: the engine's measure before
	// and after, so other work on a shared engine moves it too.
	Freed int64
}

// Prune removes from the engine what the stopped server instance keeps
// there and no record claims, as a start does (RemoveOrphans), and its
// whole layer cache: build containers, sandbox containers KeepSandbox does
// not claim, build images KeepImage does not claim, layer images, and envd
// volumes no container mounts. The instance's server must not be running.
func Prune(ctx context.Context, opts PruneOptions) (PruneReport, error) {
	var report PruneReport
	in, err := openInstance(ctx, opts.DockerHost, opts.Instance)
	if err != nil {
		return report, err
	}
	defer in.cli.Close()
	before, layersBefore, err := in.objects(ctx)
	if err != nil {
		return report, err
	}
	list, err := in.labels.list(ctx, in.cli)
	if err != nil {
		return report, fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, c := range list {
		if _, _, orphaned := in.labels.orphaned(c, opts.KeepSandbox); orphaned {
			errs = append(errs, removeContainer(ctx, in.cli, c.ID))
		}
	}
	// Build images before layers: the layers under them go with the last tag.
	errs = append(errs,
		removeOrphanImages(ctx, in.cli, in.labels, defaultImageRepository, in.log, opts.KeepImage, nil),
		in.layers.prune(ctx, 0),
		attach.RemovableVolumes(in.cli, defaultLabelPrefix, opts.Instance).Remove(ctx, false))
	after, layersAfter, err := in.objects(ctx)
	if err != nil {
		return report, errors.Join(append(errs, err)...)
	}
	report.Kept = after
	report.Freed = max(layersBefore-layersAfter, 0)
	for _, o := range before {
		if slices.ContainsFunc(after, func(a Object) bool { return a.ID == o.ID }) {
			continue
		}
		report.Removed = append(report.Removed, o)
		if o.Kind == ObjectSandbox || o.Kind == ObjectBuild {
			report.Freed += o.Size
		}
	}
	return report, errors.Join(errs...)
}

// Objects lists what the server instance keeps on the engine at
// dockerHost (empty: DOCKER_HOST, else the default socket).
func Objects(ctx context.Context, dockerHost, instance string) ([]Object, error) {
	in, err := openInstance(ctx, dockerHost, instance)
	if err != nil {
		return nil, err
	}
	defer in.cli.Close()
	objects, _, err := in.objects(ctx)
	return objects, err
}

// instance is a server instance's objects on an engine, without a server.
type instance struct {
	cli    *docker.Client
	labels labels
	layers *layerStore
	log    *slog.Logger
}

func openInstance(ctx context.Context, dockerHost, name string) (*instance, error) {
	cli, err := connect(ctx, dockerHost)
	if err != nil {
		return nil, err
	}
	l := labels{prefix: defaultLabelPrefix, instance: name}
	log := slog.New(slog.DiscardHandler)
	return &instance{cli: cli, labels: l, log: log, layers: &layerStore{cli: cli, labels: l, repository: defaultImageRepository, log: log}}, nil
}

// objects lists the instance's sandbox and build containers, envd volumes,
// build images and layer images, and returns the size of all image layers
// on the engine.
func (in *instance) objects(ctx context.Context) ([]Object, int64, error) {
	containers, err := in.cli.ContainerList(ctx, container.ListOptions{All: true, Size: true, Filters: filters.NewArgs(
		filters.Arg("label", in.labels.key("instance")+"="+in.labels.instance),
	)})
	if err != nil {
		return nil, 0, fmt.Errorf("list containers: %w", err)
	}
	var out []Object
	for _, c := range containers {
		kind, id, _ := in.labels.orphaned(c, nil)
		switch kind {
		case kindSandbox:
			out = append(out, Object{Kind: ObjectSandbox, Name: attach.ShortID(c.ID) + " (sandbox " + id + ")", ID: c.ID, Size: c.SizeRw, Unique: c.SizeRw})
		case kindBuild:
			out = append(out, Object{Kind: ObjectBuild, Name: attach.ShortID(c.ID) + " (build " + id + ")", ID: c.ID, Size: c.SizeRw, Unique: c.SizeRw})
		}
	}
	holders, err := in.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", in.labels.key("envd-of")+"="+in.labels.instance),
	)})
	if err != nil {
		return nil, 0, fmt.Errorf("list envd volumes: %w", err)
	}
	for _, h := range holders {
		out = append(out, Object{Kind: ObjectEnvd, Name: strings.TrimPrefix(firstOr(h.Names, attach.ShortID(h.ID)), "/"), ID: h.ID, Size: -1, Unique: -1})
	}
	// The disk use's list, unlike the image list before API 1.42, has each
	// image's shared size.
	du, err := diskUsage(ctx, in.cli)
	if err != nil {
		return nil, 0, fmt.Errorf("the engine's disk use: %w", err)
	}
	for _, img := range du.Images {
		if img.Labels[in.labels.key("instance")] != in.labels.instance {
			continue
		}
		kind := ObjectImage
		if img.Labels[in.labels.key("kind")] == kindLayer {
			kind = ObjectLayer
		}
		name := strings.Join(slices.DeleteFunc(slices.Clone(img.RepoTags), func(t string) bool { return t == "<none>:<none>" }), ", ")
		if name == "" {
			name = attach.ShortID(img.ID) + " (untagged)"
		}
		unique := img.Size
		if img.SharedSize > 0 {
			unique -= img.SharedSize
		}
		out = append(out, Object{Kind: kind, Name: name, ID: img.ID, Size: img.Size, Unique: unique})
	}
	return out, du.LayersSize, nil
}

func firstOr(names []string, otherwise string) string {
	if len(names) == 0 {
		return otherwise
	}
	return names[0]
}

// diskUsage is the engine's disk use of images. The engine measures one at
// a time and refuses a second caller meanwhile ("a disk usage operation is
// already running", a plain error before API 1.42: another server's prune,
// or `docker system df`), so a refusal is tried again until ctx ends.
func diskUsage(ctx context.Context, cli *docker.Client) (types.DiskUsage, error) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		du, err := cli.DiskUsage(ctx, types.DiskUsageOptions{Types: []types.DiskUsageObject{types.ImageObject}})
		if err == nil || !strings.Contains(err.Error(), "a disk usage operation is already running") {
			return du, err
		}
		select {
		case <-ctx.Done():
			return du, errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
	}
}
