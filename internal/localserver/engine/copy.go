package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/docker/docker/api/types/container"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/buildcontext"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// nonGlobPrefix is the part of a COPY source before its first glob
// component: "src/*.js" → "src", "app" → "app", "*.txt" → ".". The source
// is checked again here, by buildcontext's rule: build steps come over the
// API from any client (E2B's SDKs too), not through a listing of this
// module, and a source outside the context would reach outside the
// staging directory.
func nonGlobPrefix(src string) (string, error) {
	clean, err := buildcontext.CleanSource("", src)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, part := range strings.Split(clean, "/") {
		if strings.ContainsAny(part, `*?[{\`) {
			break
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return ".", nil
	}
	return path.Join(parts...), nil
}

// copy runs a COPY/ADD step (args [src, dest, user, mode]): the stored
// archive is checked, extracted into the container by the engine and
// placed with Docker's COPY semantics.
func (b *builder) copy(ctx context.Context, step string, st e2b.TemplateStep) error {
	args := st.CopyArgs()
	src, dest, owner, mode := args.Src, args.Dest, args.User, args.Mode
	if src == "" {
		return errors.New("COPY has no source")
	}
	if mode != "" && strings.Trim(mode, "01234567") != "" {
		return fmt.Errorf("COPY mode %q is not octal", mode)
	}
	prefix, err := nonGlobPrefix(src)
	if err != nil {
		return err
	}
	archive, ok := b.spec.Archives[st.FilesHash]
	if !ok {
		return fmt.Errorf("no stored files for hash %q", st.FilesHash)
	}
	if err := checkArchiveFile(archive); err != nil {
		return err
	}

	into := strings.HasSuffix(dest, "/") || dest == "" || dest == "."
	target, err := b.resolve(ctx, dest)
	if err != nil {
		return err
	}
	if owner == "" {
		owner = b.user
	}

	// The engine extracts the archive straight into the container: one pass
	// over the bytes, no upload spool. It extracts chrooted into the
	// container's root file system, so a link a process of the build plants
	// in the staging directory reaches nothing beyond the container. The
	// entries are rebased below the staging directory and extracted at the
	// root, since the engine refuses links whose target leaves the directory
	// it extracts into, and COPY copies those as links.
	// A layer tar of our own registered with ImageLoad would spare the
	// commit but costs about as much on Docker 20.10 (design/performance.md,
	// "Local builds").
	staging := "/.e2b-copy-" + step // /.e2b is envd's read-only volume
	if _, err := b.root(ctx, "staging the files", `mkdir -p "$1/unpack"`, staging); err != nil {
		return err
	}
	if err := b.extract(ctx, archive, strings.TrimPrefix(staging, "/")+"/unpack"); err != nil {
		return fmt.Errorf("extracting the files: %w", err)
	}
	source := path.Join(staging, "unpack", prefix)
	if _, err := b.root(ctx, fmt.Sprintf("copying %s to %s", src, target), placeScript, source, target, boolFlag(into), owner, mode, prefix); err != nil {
		return err
	}
	if _, err := b.root(ctx, "removing the staged files", `rm -rf "$1"`, staging); err != nil {
		return err
	}
	return nil
}

// extract extracts the stored archive into the build container below dir
// (relative to its root).
func (b *builder) extract(ctx context.Context, archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return fmt.Errorf("stored files: %w", err)
	}
	defer f.Close()
	pr, pw := io.Pipe()
	rebased := make(chan error, 1)
	go func() {
		err := buildcontext.Rebase(pw, f, dir)
		pw.CloseWithError(err)
		rebased <- err
	}()
	err = b.d.cli.CopyToContainer(ctx, b.c.id, "/", pr, container.CopyToContainerOptions{})
	pr.CloseWithError(errors.New("extraction ended")) // stops Rebase when the engine gave up early
	if rerr := <-rebased; err == nil && rerr != nil {
		err = rerr
	}
	return err
}

// checkArchiveFile runs buildcontext.CheckArchive on a stored archive: never
// trust a file because an earlier check passed.
func checkArchiveFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("stored files: %w", err)
	}
	defer f.Close()
	_, err = buildcontext.CheckArchive(f, buildcontext.ArchiveLimits{})
	return err
}

func boolFlag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
