package engine

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
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

// envdVolumeFor returns the container holding the envd volume for
// containers of the image ref: envd must be a build for the image's
// architecture (an amd64 engine runs arm64 images under emulation), the
// engine's when the image names none. An architecture without an envd
// build is one error naming the image, its architecture and where envd
// builds are looked for.
func (d *Docker) envdVolumeFor(ctx context.Context, ref string) (string, error) {
	img, err := d.cli.ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("inspect image %s: %w", ref, err)
	}
	arch, err := imageEnvdArch(img.Architecture, d.engineArch)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	v, err := d.ensureEnvdVolume(ctx, arch)
	if err != nil {
		return "", fmt.Errorf("image %s is built for linux/%s: %w", ref, arch, err)
	}
	return v.holder, nil
}

// ensureEnvdVolume makes sure the engine has the envd volume of this
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
func (d *Docker) ensureEnvdVolume(ctx context.Context, arch string) (envdVolume, error) {
	// Held until the volume is recorded: removeEnvdVolumes, which keeps
	// what is recorded, holds it too.
	d.envdMu.Lock()
	defer d.envdMu.Unlock()
	if v, ok := d.envdVolumes[arch]; ok {
		return v, nil
	}
	bin, err := d.envd.binary(arch)
	if err != nil {
		return envdVolume{}, err
	}
	holder, err := d.envdHolder(ctx, bin, arch)
	if err != nil {
		return envdVolume{}, err
	}
	v := envdVolume{holder: holder, binary: bin}
	d.envdVolumes[arch] = v
	return v, nil
}

// envdHolder imports the envd build bin for arch unless the engine has it
// and creates this instance's container holding its volume unless it
// exists; it returns the container's ID.
func (d *Docker) envdHolder(ctx context.Context, bin, arch string) (string, error) {
	digest, err := fileDigest(bin)
	if err != nil {
		return "", fmt.Errorf("envd binary: %w", err)
	}
	// Named after the label prefix its kind label carries, so that whoever
	// removes it (removeEnvdVolumes) is whoever may have imported it.
	repo, tag := d.opts.LabelPrefix+"-envd", digest[:16]
	ref := repo + ":" + tag
	name := d.envdHolderName(tag)
	// Another server on the same engine removes envd images that no container
	// holds (removeEnvdVolumes): one may go between the check and the create
	// below, so a create that finds no image imports it again.
	for attempt := 1; ; attempt++ {
		if _, err := d.cli.ImageInspect(ctx, ref); isNotFound(err) {
			if err := d.importEnvd(ctx, bin, repo, tag, arch); err != nil {
				return "", err
			}
		} else if err != nil {
			return "", fmt.Errorf("inspect image %s: %w", ref, err)
		}
		if insp, err := d.cli.ContainerInspect(ctx, name); err == nil {
			return insp.ID, nil
		} else if !isNotFound(err) {
			return "", fmt.Errorf("inspect container %s: %w", name, err)
		}
		created, err := d.cli.ContainerCreate(ctx, &container.Config{
			Image:      ref,
			Entrypoint: []string{containerEnvdPath},
			Volumes:    map[string]struct{}{containerEnvdDir: {}},
			Labels:     map[string]string{d.label("envd-of"): d.opts.Instance},
		}, d.hostConfig(NetworkNone, ""), nil, nil, name)
		switch {
		case cerrdefs.IsConflict(err): // another start of this instance made it
			insp, ierr := d.cli.ContainerInspect(ctx, name)
			if ierr != nil {
				return "", fmt.Errorf("inspect container %s: %w", name, ierr)
			}
			return insp.ID, nil
		case isNotFound(err) && attempt < 3:
			continue
		case err != nil:
			return "", fmt.Errorf("create the envd volume from %s: %w", ref, err)
		}
		return created.ID, nil
	}
}

func (d *Docker) envdHolderName(tag string) string {
	return d.opts.LabelPrefix + "-envd-" + d.opts.Instance + "-" + tag
}

// importEnvd imports the binary at bin as the image repo:tag holding
// /.e2b/envd, owned by root and not writable by anyone.
func (d *Docker) importEnvd(ctx context.Context, bin, repo, tag, arch string) error {
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
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: containerEnvdDir[1:] + "/", Mode: 0o755})
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: containerEnvdPath[1:], Mode: 0o555, Size: fi.Size()})
		}
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	rc, err := d.cli.ImageImport(ctx, image.ImportSource{Source: pr, SourceName: "-"}, repo, image.ImportOptions{
		Tag:      tag,
		Platform: "linux/" + arch,
		Changes:  []string{"LABEL " + d.label("kind") + "=" + kindEnvd},
	})
	if err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("import envd into the engine: %w", err)
	}
	defer rc.Close()
	if err := readPullProgress(rc); err != nil {
		return fmt.Errorf("import envd into the engine: %w", err)
	}
	return nil
}

// removeEnvdVolumes removes this instance's envd volumes that no
// container mounts (kept sandboxes of an earlier version of the server use
// theirs), but those this server uses when keepCurrent, then the envd
// images no container uses.
func (d *Docker) removeEnvdVolumes(ctx context.Context, keepCurrent bool) error {
	if keepCurrent {
		// Held throughout, so that no volume is made between the listing
		// and the removals, where it would be removed unrecorded.
		d.envdMu.Lock()
		defer d.envdMu.Unlock()
	}
	holders, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", d.label("envd-of")+"="+d.opts.Instance),
	)})
	if err != nil {
		return fmt.Errorf("list envd volumes: %w", err)
	}
	all, err := d.list(ctx)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	current := map[string]bool{}
	if keepCurrent {
		for _, v := range d.envdVolumes {
			current[v.holder] = true
		}
	}
	var errs []error
	for _, h := range holders {
		if current[h.ID] || mountedElsewhere(h, all) {
			continue
		}
		errs = append(errs, d.removeContainer(ctx, h.ID))
	}
	images, err := d.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", d.label("kind")+"="+kindEnvd))})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list envd images: %w", err))...)
	}
	for _, img := range images {
		// Another instance's volume still holds it: the engine refuses.
		_, err := d.cli.ImageRemove(ctx, img.ID, image.RemoveOptions{})
		if err == nil || isNotFound(err) || cerrdefs.IsConflict(err) {
			continue
		}
		// Another server removed it meanwhile: Docker 20.10 answers
		// "unrecognized image ID", an internal error, when it loses that race.
		if _, ierr := d.cli.ImageInspect(ctx, img.ID); isNotFound(ierr) {
			continue
		}
		errs = append(errs, fmt.Errorf("remove envd image %s: %w", shortID(img.ID), err))
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
