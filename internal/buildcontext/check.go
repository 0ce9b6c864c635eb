package buildcontext

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// ErrUnsafeArchive marks an archive CheckArchive refuses: not a gzip'd or plain tar, empty,
// beyond its limits, or holding an entry that could land outside the directory it is
// extracted into.
var ErrUnsafeArchive = errors.New("unsafe archive")

// ArchiveLimits bound what CheckArchive reads; zero means no limit.
type ArchiveLimits struct {
	MaxUnpackedBytes int64 // bytes of the tar stream after decompression
	MaxEntries       int
}

// CheckArchive reads a build-context archive (gzip'd or plain tar, as WriteArchive or the
// E2B SDKs write it) to its end within limits and reports whether it is gzip'd. It refuses,
// with ErrUnsafeArchive and naming the entry, anything that could land outside the
// directory the archive is extracted into: empty or invalid names, absolute names, ".."
// components, entries below a name that was a symlink earlier in the archive, symlinks to
// absolute paths or out of the root, hard links to such names, and entries other than
// files, directories and links. Nothing is extracted; the caller unpacks the archive it
// checked with a plain tar. A failure to read r is returned as it is, not as
// ErrUnsafeArchive.
func CheckArchive(r io.Reader, limits ArchiveLimits) (gzipped bool, err error) {
	src := &sourceReader{r: r}
	refuse := func(format string, args ...any) error {
		if src.err != nil {
			return fmt.Errorf("reading archive: %w", src.err)
		}
		return &contextError{fmt.Sprintf(format, args...), ErrUnsafeArchive}
	}
	br := bufio.NewReaderSize(src, 64<<10)
	var stream io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gzipped = true
		zr, err := gzip.NewReader(br)
		if err != nil {
			return true, refuse("archive is not valid gzip: %v", err)
		}
		defer zr.Close()
		stream = zr
	}
	if limits.MaxUnpackedBytes > 0 {
		stream = &unpackedLimit{r: stream, left: limits.MaxUnpackedBytes}
	}
	tooLarge := func() error {
		return refuse("archive unpacks to more than the limit of %d bytes", limits.MaxUnpackedBytes)
	}
	tr := tar.NewReader(stream)
	// Names that were symlinks at any point: tar may write through them, so nothing may lie
	// below them, even after a later entry replaced them.
	symlinks := map[string]bool{}
	// Every symlink's target, checked again at the end against all the archive's links.
	var links []*tar.Header
	for entries := 0; ; entries++ {
		hdr, err := tr.Next()
		switch {
		case errors.Is(err, io.EOF) && entries == 0:
			return gzipped, refuse("archive has no entries")
		case errors.Is(err, io.EOF):
			for _, link := range links {
				if via := climbsOutOfSymlink(link, symlinks); via != "" {
					return gzipped, refuse("archive entry %q: symlink to %q climbs out of the symlink %q with \"..\", which may leave the archive", link.Name, link.Linkname, via)
				}
			}
			return gzipped, nil
		case errors.Is(err, errUnpackedTooLarge):
			return gzipped, tooLarge()
		case err != nil:
			return gzipped, refuse("archive is not a valid tar: %v", err)
		}
		if limits.MaxEntries > 0 && entries >= limits.MaxEntries {
			return gzipped, refuse("archive has more than the limit of %d entries", limits.MaxEntries)
		}
		if err := checkEntry(hdr, symlinks); err != nil {
			return gzipped, refuse("archive entry %q: %v", hdr.Name, err)
		}
		if hdr.Typeflag == tar.TypeSymlink {
			links = append(links, hdr)
		}
		// Read the content through the limit (Next would skip it unread).
		if _, err := io.Copy(io.Discard, tr); errors.Is(err, errUnpackedTooLarge) {
			return gzipped, tooLarge()
		} else if err != nil {
			return gzipped, refuse("archive entry %q: %v", hdr.Name, err)
		}
	}
}

// checkEntry checks one entry against the symlinks seen before it.
func checkEntry(hdr *tar.Header, symlinks map[string]bool) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // metadata only; tar writes nothing for it
	}
	name, err := entryName(hdr.Name)
	if err != nil {
		return err
	}
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if symlinks[dir] {
			return fmt.Errorf("lies below the symlink %q", dir)
		}
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeDir:
	case tar.TypeSymlink:
		if path.IsAbs(hdr.Linkname) {
			return fmt.Errorf("symlink to the absolute path %q leaves the archive", hdr.Linkname)
		}
		if escapes(path.Join(path.Dir(name), hdr.Linkname)) {
			return fmt.Errorf("symlink to %q leaves the archive", hdr.Linkname)
		}
		symlinks[name] = true
	case tar.TypeLink:
		if _, err := entryName(hdr.Linkname); err != nil {
			return fmt.Errorf("hard link to %q: %w", hdr.Linkname, err)
		}
	default:
		return fmt.Errorf("unsupported entry type %q", string(hdr.Typeflag))
	}
	return nil
}

// entryName checks the name of an entry (or a hard link's target) and returns it cleaned,
// "." for the extraction directory itself.
func entryName(name string) (string, error) {
	switch {
	case name == "":
		return "", errors.New("empty name")
	case strings.ContainsRune(name, 0) || strings.Contains(name, `\`):
		return "", errors.New("invalid name: it holds a NUL or a backslash")
	case path.IsAbs(name):
		return "", errors.New("absolute name")
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", errors.New(`name contains ".."`)
		}
	}
	return path.Clean(name), nil
}

// climbsOutOfSymlink returns the symlink a link's target passes through before a ".."
// component, or "". Lexically "a/b/.." is "a", but when a/b is itself a link, ".." climbs
// from wherever a/b points, which the lexical check cannot see; such targets are refused
// whichever entry (earlier or later in the archive) makes a/b a link.
func climbsOutOfSymlink(link *tar.Header, symlinks map[string]bool) string {
	name := path.Clean(link.Name)
	var walked []string
	if dir := path.Dir(name); dir != "." {
		walked = strings.Split(dir, "/")
	}
	via := ""
	for _, part := range strings.Split(link.Linkname, "/") {
		switch part {
		case "", ".":
		case "..":
			if via != "" {
				return via
			}
			walked = walked[:len(walked)-1] // escapes() already refused climbing above the root
		default:
			walked = append(walked, part)
			if p := strings.Join(walked, "/"); symlinks[p] {
				via = p
			}
		}
	}
	return ""
}

func escapes(p string) bool { return p == ".." || strings.HasPrefix(p, "../") }

// errUnpackedTooLarge ends reading when the unpacked archive passes ArchiveLimits.MaxUnpackedBytes.
var errUnpackedTooLarge = errors.New("unpacked size limit reached")

// unpackedLimit reads at most left bytes, then fails with errUnpackedTooLarge.
type unpackedLimit struct {
	r    io.Reader
	left int64
}

func (l *unpackedLimit) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errUnpackedTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// sourceReader remembers a failure to read the archive itself, which says nothing about
// the archive's safety.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}
