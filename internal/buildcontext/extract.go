package buildcontext

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// ErrUnsafeArchive marks an uploaded archive entry that Extract refuses.
var ErrUnsafeArchive = errors.New("unsafe archive entry")

// CleanArchivePath checks the name of an entry of an uploaded build-context archive and
// returns it cleaned ("." for the context itself): relative, "/"-separated, never leaving
// the directory the archive is extracted into.
func CleanArchivePath(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) || strings.Contains(name, `\`) {
		return "", &contextError{fmt.Sprintf("archive entry %q has an invalid name", name), ErrUnsafeArchive}
	}
	if path.IsAbs(name) {
		return "", &contextError{fmt.Sprintf("archive entry %q is an absolute path", name), ErrUnsafeArchive}
	}
	cleaned := path.Clean(name)
	if cleaned == ".." || strings.HasPrefix(cleaned, "../") {
		return "", &contextError{fmt.Sprintf("archive entry %q leaves the extraction directory", name), ErrUnsafeArchive}
	}
	return cleaned, nil
}

// Extract unpacks a build-context archive (gzip'd or plain tar, as WriteArchive or the E2B
// SDKs write it) into dir, which must exist. Every operation goes through an os.Root on
// dir, so neither entry names nor symlinks unpacked earlier can make it write outside dir.
// Directories, regular files, symlinks and hard links (to entries inside dir) are
// accepted; devices, FIFOs and names leaving dir fail with ErrUnsafeArchive naming the
// entry. Permission bits come from the archive; owners and times are not restored.
func Extract(ctx context.Context, r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening extraction directory: %w", err)
	}
	defer root.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("reading archive: %w", err)
		}
		defer zr.Close()
		src = zr
	}
	tr := tar.NewReader(src)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading archive: %w", err)
		}
		if err := extractEntry(ctx, root, tr, h); err != nil {
			return err
		}
	}
}

func extractEntry(ctx context.Context, root *os.Root, tr *tar.Reader, h *tar.Header) error {
	if h.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	name, err := CleanArchivePath(h.Name)
	if err != nil {
		return err
	}
	perm := fs.FileMode(h.Mode) & fs.ModePerm
	fail := func(err error) error { return fmt.Errorf("extracting %s: %w", name, err) }
	if name == "." {
		return nil // the extraction directory itself
	}
	if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return fail(err)
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if fi, err := root.Lstat(name); err == nil && !fi.IsDir() {
			if err := root.Remove(name); err != nil {
				return fail(err)
			}
		}
		if err := root.MkdirAll(name, 0o755); err != nil {
			return fail(err)
		}
		return wrapErr(root.Chmod(name, perm), fail)
	case tar.TypeReg:
		if err := removeNonDir(root, name); err != nil {
			return fail(err)
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fail(err)
		}
		_, err = copyWithContext(ctx, f, io.LimitReader(tr, h.Size))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fail(err)
		}
		return wrapErr(root.Chmod(name, perm), fail)
	case tar.TypeSymlink:
		if err := removeNonDir(root, name); err != nil {
			return fail(err)
		}
		return wrapErr(root.Symlink(h.Linkname, name), fail)
	case tar.TypeLink:
		target, err := CleanArchivePath(h.Linkname)
		if err != nil {
			return err
		}
		if err := removeNonDir(root, name); err != nil {
			return fail(err)
		}
		return wrapErr(root.Link(target, name), fail)
	}
	return &contextError{fmt.Sprintf("archive entry %s has type %q, which a build context cannot hold", name, h.Typeflag), ErrUnsafeArchive}
}

// removeNonDir removes what a file or link entry replaces, as tar does.
func removeNonDir(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("a directory is in the way")
	}
	return root.Remove(name)
}

func wrapErr(err error, wrap func(error) error) error {
	if err != nil {
		return wrap(err)
	}
	return nil
}
