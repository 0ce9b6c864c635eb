package buildcontext

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

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

// Rewrite copies the archive r (plain or gzip'd tar) to w as a plain tar, each entry
// through edit, which returns the headers to write in its place: none drops the entry;
// any before the last must have no content (directories it needs), the last is written
// with the entry's content and size. Names (and hard links' targets) reach edit cleaned,
// without "./" or a trailing slash; a name that could leave the directory the archive is
// extracted into is refused, as CheckArchive refuses it, before edit sees it. A
// directory's name gets its trailing slash back. The local server's COPY places an
// archive in the container this way, each entry renamed to its destination with the
// step's owner and mode, for envd to write at the container's root (envd/server.Extract).
func Rewrite(w io.Writer, r io.Reader, edit func(*tar.Header) ([]*tar.Header, error)) error {
	stream, _, closeFn, err := uncompressed(bufio.NewReaderSize(r, 64<<10))
	if err != nil {
		return fmt.Errorf("rewrite: %w", err)
	}
	defer closeFn()
	tr, tw := tar.NewReader(stream), tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("rewrite: %w", err)
		}
		name := hdr.Name
		if hdr.Name, err = entryName(name); err != nil {
			return fmt.Errorf("rewrite: entry %q: %w", name, err)
		}
		if hdr.Typeflag == tar.TypeLink {
			if hdr.Linkname, err = entryName(hdr.Linkname); err != nil {
				return fmt.Errorf("rewrite: hard link %q: %w", name, err)
			}
		}
		out, err := edit(hdr)
		if err != nil {
			return err
		}
		for i, h := range out {
			if h.Typeflag == tar.TypeDir && !strings.HasSuffix(h.Name, "/") {
				h.Name += "/"
			}
			if i < len(out)-1 {
				h.Size = 0
			}
			if err := tw.WriteHeader(h); err != nil {
				return fmt.Errorf("rewrite: %w", err)
			}
		}
		if len(out) == 0 {
			continue
		}
		// The header's size bounds what is copied; the tar writer refuses more.
		if _, err := io.CopyN(tw, tr, out[len(out)-1].Size); err != nil {
			return fmt.Errorf("rewrite: %w", err)
		}
	}
}
