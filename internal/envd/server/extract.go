package server

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"
)

// Extract writes the plain tar archive r below dir as Docker extracts a
// COPY's archive: every entry gets the owner, mode and modification time
// its header gives; an existing directory stays and takes the header's
// owner and mode; any other existing entry is replaced, but a directory
// is never replaced by a file. Missing parents are made, root's, 0755.
// Names (and hard links' targets) must be local (filepath.IsLocal), as
// buildcontext.Rewrite makes them; symlinks already below dir are
// followed, as they are inside the container whose files dir is.
//
// It is how envd --extract places a build's COPY from inside the build
// container: a runtime that keeps what the container already looked up of
// its files (gVisor) does not see files the engine writes from outside.
func Extract(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	type dirTime struct {
		path  string
		mtime time.Time
	}
	var dirs []dirTime
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("extract: %w", err)
		}
		if !filepath.IsLocal(h.Name) {
			return fmt.Errorf("extract: entry %q: the name is absolute, empty or leaves the directory", h.Name)
		}
		name := path.Clean(h.Name)
		if name == "." {
			continue // dir itself is the caller's
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		if err := extractEntry(tr, h, dir, target); err != nil {
			return fmt.Errorf("extract /%s: %w", name, err)
		}
		if h.Typeflag == tar.TypeDir {
			dirs = append(dirs, dirTime{target, h.ModTime})
		}
	}
	// A directory's time is set last: its entries changed it.
	for _, d := range slices.Backward(dirs) {
		if err := os.Chtimes(d.path, d.mtime, d.mtime); err != nil {
			return fmt.Errorf("extract: %w", err)
		}
	}
	return nil
}

// extractEntry writes the entry h (content in tr) at target.
func extractEntry(tr *tar.Reader, h *tar.Header, dir, target string) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	existing, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		existing = nil
	case err != nil:
		return err
	}
	if existing != nil && (!existing.IsDir() || h.Typeflag != tar.TypeDir) {
		if existing.IsDir() {
			return errors.New("cannot overwrite a directory with a file")
		}
		if err := os.Remove(target); err != nil {
			return err
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if existing == nil || !existing.IsDir() {
			if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
		}
	case tar.TypeReg:
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := os.Symlink(h.Linkname, target); err != nil {
			return err
		}
	case tar.TypeLink:
		if !filepath.IsLocal(h.Linkname) {
			return fmt.Errorf("the hard link's target %q is absolute, empty or leaves the directory", h.Linkname)
		}
		if err := os.Link(filepath.Join(dir, filepath.FromSlash(h.Linkname)), target); err != nil {
			return err
		}
	default:
		return fmt.Errorf("entries of type %q are not copied", h.Typeflag)
	}
	if h.Typeflag == tar.TypeLink {
		return nil // the file it names got its owner, mode and time
	}
	if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
		return err
	}
	if h.Typeflag == tar.TypeSymlink {
		return nil
	}
	// After the owner: chown clears the set-user-ID and set-group-ID bits.
	mode := h.FileInfo().Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	if err := os.Chmod(target, mode); err != nil {
		return err
	}
	if h.Typeflag == tar.TypeDir {
		return nil
	}
	return os.Chtimes(target, h.ModTime, h.ModTime)
}
