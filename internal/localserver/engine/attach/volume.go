package attach

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	docker "github.com/docker/docker/client"
)

// kindEnvd marks the envd image. The container that holds the envd volume
// carries the label envd-of=<instance> instead of instance, so that it is
// none of the instance's sandbox or build containers.
const kindEnvd = "envd"

// envdVolume is the envd volume of one architecture: the container that
// holds it and the build it holds.
type envdVolume struct {
	holder, binary string
}

// Volumes are the envd volumes of one server on its engine, one per
// architecture its containers have needed, made when first needed: every
// sandbox and build container mounts the one of its image's architecture
// (VolumesFrom, read-only) at EnvdDir.
type Volumes struct {
	cli *docker.Client
	// labelPrefix and instance are the server's (the labels of its
	// containers); hostConfig is what the holder containers are created
	// with (never started).
	labelPrefix, instance string
	hostConfig            *container.HostConfig
	// envd finds the envd build of each architecture; engineArch is the
	// engine's (Go's name), which images that name none are run as.
	envd       envdFinder
	engineArch string

	// mu guards volumes, by architecture.
	mu      sync.Mutex
	volumes map[string]envdVolume
}

// VolumesOptions configures NewVolumes.
type VolumesOptions struct {
	// EnvdBinaries are the explicit envd builds (--envd-binary), at most
	// one per architecture (envdFinder).
	EnvdBinaries []string
	LabelPrefix  string
	Instance     string
	// HostConfig is the host configuration of the containers that hold the
	// volumes, which never start.
	HostConfig *container.HostConfig
}

// NewVolumes checks the explicit envd builds and makes the envd volume of
// the engine's architecture: what cannot serve the engine is an error at
// start-up. Other architectures' volumes are made when an image needs one.
func NewVolumes(ctx context.Context, cli *docker.Client, opts VolumesOptions) (*Volumes, error) {
	v := &Volumes{cli: cli, labelPrefix: opts.LabelPrefix, instance: opts.Instance, hostConfig: opts.HostConfig, volumes: map[string]envdVolume{}}
	var err error
	if v.envd, err = thisEnvdFinder(opts.EnvdBinaries); err != nil {
		return nil, err
	}
	info, err := cli.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker info: %w", err)
	}
	if v.engineArch, err = engineArch(info.Architecture); err != nil {
		return nil, err
	}
	if _, err := v.ensure(ctx, v.engineArch); err != nil {
		return nil, fmt.Errorf("the Docker engine runs linux/%s: %w", v.engineArch, err)
	}
	return v, nil
}

// ForEngine returns the holder of the volume of the engine's own
// architecture and the envd build it holds.
func (v *Volumes) ForEngine(ctx context.Context) (holder, binary string, err error) {
	vol, err := v.ensure(ctx, v.engineArch)
	return vol.holder, vol.binary, err
}

func (v *Volumes) label(name string) string { return v.labelPrefix + "." + name }

// For returns the container holding the envd volume for
// containers of the image ref: envd must be a build for the image's
// architecture (an amd64 engine runs arm64 images under emulation), the
// engine's when the image names none. An architecture without an envd
// build is one error naming the image, its architecture and where envd
// builds are looked for.
func (v *Volumes) For(ctx context.Context, ref string) (string, error) {
	img, err := v.cli.ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("inspect image %s: %w", ref, err)
	}
	arch, err := imageEnvdArch(img.Architecture, v.engineArch)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	vol, err := v.ensure(ctx, arch)
	if err != nil {
		return "", fmt.Errorf("image %s is built for linux/%s: %w", ref, arch, err)
	}
	return vol.holder, nil
}

// ensure makes sure the engine has the envd volume of this
// server's envd build for arch and returns it; every sandbox and build
// container of arch mounts it (VolumesFrom, read-only). Made once per
// architecture and server, when first needed.
//
// The binary reaches the engine through its API only: imported as a
// one-file image <LabelPrefix>-envd:<digest> (once per envd build and
// engine), from which a never-started container of this instance gets an
// anonymous volume at /.e2b that the engine fills from the image. Any
// engine works (a remote one, Docker Desktop's VM); containers start
// without a copy of envd each, and commits never hold it (volumes are not
// part of a container's files).
func (v *Volumes) ensure(ctx context.Context, arch string) (envdVolume, error) {
	// Held until the volume is recorded: Remove, which keeps what is
	// recorded, holds it too.
	v.mu.Lock()
	defer v.mu.Unlock()
	if vol, ok := v.volumes[arch]; ok {
		return vol, nil
	}
	bin, err := v.envd.binary(arch)
	if err != nil {
		return envdVolume{}, err
	}
	holder, err := v.holder(ctx, bin, arch)
	if err != nil {
		return envdVolume{}, err
	}
	vol := envdVolume{holder: holder, binary: bin}
	v.volumes[arch] = vol
	return vol, nil
}

// holder imports the envd build bin for arch unless the engine has it
// and creates this instance's container holding its volume unless it
// exists; it returns the container's ID.
func (v *Volumes) holder(ctx context.Context, bin, arch string) (string, error) {
	digest, err := fileDigest(bin)
	if err != nil {
		return "", fmt.Errorf("envd binary: %w", err)
	}
	// Named after the label prefix its kind label carries, so that whoever
	// removes it (Remove) is whoever may have imported it.
	repo, tag := v.labelPrefix+"-envd", digest[:16]
	ref := repo + ":" + tag
	name := v.holderName(tag)
	// Another server on the same engine removes envd images that no container
	// holds (Remove): one may go between the check and the create
	// below, so a create that finds no image imports it again.
	for attempt := 1; ; attempt++ {
		if _, err := v.cli.ImageInspect(ctx, ref); cerrdefs.IsNotFound(err) {
			if err := v.importEnvd(ctx, bin, repo, tag, arch); err != nil {
				return "", err
			}
		} else if err != nil {
			return "", fmt.Errorf("inspect image %s: %w", ref, err)
		}
		if insp, err := v.cli.ContainerInspect(ctx, name); err == nil {
			return insp.ID, nil
		} else if !cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("inspect container %s: %w", name, err)
		}
		created, err := v.cli.ContainerCreate(ctx, &container.Config{
			Image:      ref,
			Entrypoint: []string{EnvdPath},
			Volumes:    map[string]struct{}{EnvdDir: {}},
			Labels:     map[string]string{v.label("envd-of"): v.instance},
		}, v.hostConfig, nil, nil, name)
		switch {
		case cerrdefs.IsConflict(err): // another start of this instance made it
			insp, ierr := v.cli.ContainerInspect(ctx, name)
			if ierr != nil {
				return "", fmt.Errorf("inspect container %s: %w", name, ierr)
			}
			return insp.ID, nil
		case cerrdefs.IsNotFound(err) && attempt < 3:
			continue
		case err != nil:
			return "", fmt.Errorf("create the envd volume from %s: %w", ref, err)
		}
		return created.ID, nil
	}
}

func (v *Volumes) holderName(tag string) string {
	return v.labelPrefix + "-envd-" + v.instance + "-" + tag
}

// importEnvd imports the binary at bin as the image repo:tag holding
// /.e2b/envd, owned by root and not writable by anyone.
func (v *Volumes) importEnvd(ctx context.Context, bin, repo, tag, arch string) error {
	f, err := os.Open(bin)
	if err != nil {
		return fmt.Errorf("envd binary: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("envd binary: %w", err)
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: EnvdDir[1:] + "/", Mode: 0o755})
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: EnvdPath[1:], Mode: 0o555, Size: fi.Size()})
		}
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	rc, err := v.cli.ImageImport(ctx, image.ImportSource{Source: pr, SourceName: "-"}, repo, image.ImportOptions{
		Tag:      tag,
		Platform: "linux/" + arch,
		Changes:  []string{"LABEL " + v.label("kind") + "=" + kindEnvd},
	})
	if err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("import envd into the engine: %w", err)
	}
	defer rc.Close()
	if err := ReadProgress(rc); err != nil {
		return fmt.Errorf("import envd into the engine: %w", err)
	}
	return nil
}

// Remove removes this instance's envd volumes that no
// container mounts (kept sandboxes of an earlier version of the server use
// theirs), but those this server uses when keepCurrent, then the envd
// images no container uses.
func (v *Volumes) Remove(ctx context.Context, keepCurrent bool) error {
	if keepCurrent {
		// Held throughout, so that no volume is made between the listing
		// and the removals, where it would be removed unrecorded.
		v.mu.Lock()
		defer v.mu.Unlock()
	}
	holders, err := v.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", v.label("envd-of")+"="+v.instance),
	)})
	if err != nil {
		return fmt.Errorf("list envd volumes: %w", err)
	}
	all, err := v.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", v.label("instance")+"="+v.instance),
	)})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	current := map[string]bool{}
	if keepCurrent {
		for _, vol := range v.volumes {
			current[vol.holder] = true
		}
	}
	var errs []error
	for _, h := range holders {
		if current[h.ID] || mountedElsewhere(h, all) {
			continue
		}
		if err := v.cli.ContainerRemove(ctx, h.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", ShortID(h.ID), err))
		}
	}
	images, err := v.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", v.label("kind")+"="+kindEnvd))})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list envd images: %w", err))...)
	}
	for _, img := range images {
		// Another instance's volume still holds it: the engine refuses.
		_, err := v.cli.ImageRemove(ctx, img.ID, image.RemoveOptions{})
		if err == nil || cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err) {
			continue
		}
		// Another server removed it meanwhile: Docker 20.10 answers
		// "unrecognized image ID", an internal error, when it loses that race.
		if _, ierr := v.cli.ImageInspect(ctx, img.ID); cerrdefs.IsNotFound(ierr) {
			continue
		}
		errs = append(errs, fmt.Errorf("remove envd image %s: %w", ShortID(img.ID), err))
	}
	return errors.Join(errs...)
}

// mountedElsewhere tells whether a container other than holder mounts one
// of holder's volumes.
func mountedElsewhere(holder container.Summary, all []container.Summary) bool {
	for _, m := range holder.Mounts {
		for _, c := range all {
			if c.ID == holder.ID {
				continue
			}
			for _, cm := range c.Mounts {
				if cm.Name != "" && cm.Name == m.Name {
					return true
				}
			}
		}
	}
	return false
}

func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// RemovableVolumes are the envd volumes of the server instance on the
// engine cli, for Remove only: what tests remove when their server's data
// directory goes.
func RemovableVolumes(cli *docker.Client, labelPrefix, instance string) *Volumes {
	return &Volumes{cli: cli, labelPrefix: labelPrefix, instance: instance, volumes: map[string]envdVolume{}}
}

// EngineArch is the engine's architecture (Go's name), which images that
// name none are run as.
func (v *Volumes) EngineArch() string { return v.engineArch }
