package buildcontext

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/klauspost/compress/gzip"
)

// uncompressed returns the tar stream of a plain or gzip'd archive read from br,
// whether it was gzip'd, and what to close when done.
func uncompressed(br *bufio.Reader) (stream io.Reader, gzipped bool, closeFn func(), err error) {
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, true, nil, err
		}
		return zr, true, func() { _ = zr.Close() }, nil
	}
	return br, false, func() {}, nil
}

// Rebase copies the archive r (plain or gzip'd tar) to w as a plain tar whose
// entries all sit below dir (a relative, slash-separated path), hard links' targets
// included; symlink targets are kept as they are. The local server extracts COPY
// sources at the container's root this way: Docker refuses a symlink whose target
// leaves the directory it extracts into, and a COPY copies such links as links.
func Rebase(w io.Writer, r io.Reader, dir string) error {
	if dir == "" || path.IsAbs(dir) || path.Clean(dir) != dir {
		return fmt.Errorf("rebase: %q is not a clean relative directory", dir)
	}
	stream, _, closeFn, err := uncompressed(bufio.NewReaderSize(r, 64<<10))
	if err != nil {
		return fmt.Errorf("rebase: %w", err)
	}
	defer closeFn()
	tr, tw := tar.NewReader(stream), tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("rebase: %w", err)
		}
		// Names that could leave dir are refused, as CheckArchive refuses them.
		if hdr.Name, err = below(dir, hdr.Name); err != nil {
			return fmt.Errorf("rebase: entry %q: %w", hdr.Name, err)
		}
		if hdr.Typeflag == tar.TypeDir {
			hdr.Name += "/"
		}
		if hdr.Typeflag == tar.TypeLink {
			if hdr.Linkname, err = below(dir, hdr.Linkname); err != nil {
				return fmt.Errorf("rebase: hard link %q: %w", hdr.Name, err)
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("rebase: %w", err)
		}
		// The header's size bounds what is copied; the tar writer refuses more.
		if _, err := io.CopyN(tw, tr, hdr.Size); err != nil {
			return fmt.Errorf("rebase: %w", err)
		}
	}
}

// below is name, a checked archive entry name, below dir.
func below(dir, name string) (string, error) {
	clean, err := entryName(name)
	if err != nil {
		return "", err
	}
	if clean == "." {
		return dir, nil
	}
	return dir + "/" + clean, nil
}
