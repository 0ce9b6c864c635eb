package buildcontext

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
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

// CheckArchive reads a build-context archive (gzip'd or plain tar, as WriteStepArchive or the
// E2B SDKs write it) to its end-of-archive marker within limits and reports whether it is
// gzip'd. It refuses a tar that ends without the marker (cut short), and,
// with ErrUnsafeArchive and naming the entry, anything that could land outside the
// directory the archive is extracted into: empty or invalid names, absolute names, ".."
// components, entries written through a symlink (below a name that was a symlink earlier
// in the archive), hard links to such names or through a symlink, and entries other than
// files, directories and links. A symlink's target is not checked: like Docker's COPY,
// the archive carries links as links (to an absolute path or out of the context too),
// and extracting one never writes where it points. Nothing is extracted; the caller unpacks the archive it
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
	stream, gzipped, closeFn, err := uncompressed(br)
	if err != nil {
		return true, refuse("archive is not valid gzip: %v", err)
	}
	defer closeFn()
	if limits.MaxUnpackedBytes > 0 {
		stream = &unpackedLimit{r: stream, left: limits.MaxUnpackedBytes}
	}
	tooLarge := func() error {
		return refuse("archive unpacks to more than the limit of %d bytes", limits.MaxUnpackedBytes)
	}
	ends := &endMarker{r: stream}
	tr := tar.NewReader(ends)
	// Names that were symlinks at any point: tar may write through them, so nothing may lie
	// below them, even after a later entry replaced them.
	symlinks := map[string]bool{}
	for entries := 0; ; entries++ {
		before := ends.n
		hdr, err := tr.Next()
		switch {
		case errors.Is(err, io.EOF) && entries == 0:
			return gzipped, refuse("archive has no entries")
		case errors.Is(err, io.EOF) && !ends.endedAfter(before):
			// archive/tar takes an end of data at a block boundary for the
			// end of the archive; a cut-short upload looks just like that.
			return gzipped, refuse("archive ends without the end-of-archive marker (two zero blocks): it was cut short")
		case errors.Is(err, io.EOF):
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
		// Read the content through the limit (Next would skip it unread).
		//nolint:gosec // G110: the reader under tr stops at MaxUnpacked (errUnpackedTooLarge)
		if _, err := io.Copy(io.Discard, tr); errors.Is(err, errUnpackedTooLarge) {
			return gzipped, tooLarge()
		} else if err != nil {
			return gzipped, refuse("archive entry %q: %v", hdr.Name, err)
		}
	}
}

// endMarker counts the bytes of the tar stream read and how many of the
// last ones were zero, to tell the end-of-archive marker from a stream that
// just stops.
type endMarker struct {
	r     io.Reader
	n     int64 // bytes read
	zeros int64 // length of the run of zero bytes the read bytes end with
}

func (e *endMarker) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.n += int64(n)
	last := len(p[:n]) - 1
	for last >= 0 && p[last] == 0 {
		last--
	}
	if last < 0 {
		e.zeros += int64(n)
	} else {
		e.zeros = int64(n - 1 - last)
	}
	return n, err
}

// endedAfter reports whether the stream read since offset before (the
// start of tar.Reader.Next, once the previous entry's content was read: its
// padding, under one block, then headers) ended with the two zero blocks of
// the end-of-archive marker.
func (e *endMarker) endedAfter(before int64) bool {
	const marker = 2 * 512
	return e.n-before >= marker && e.zeros >= marker
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
	if via := belowSymlink(name, symlinks); via != "" {
		return fmt.Errorf("lies below the symlink %q, so it would be written through it", via)
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeDir:
	case tar.TypeSymlink:
		if name == "." {
			return errors.New("a symlink cannot replace the directory the archive is extracted into")
		}
		symlinks[name] = true
	case tar.TypeLink:
		target, err := entryName(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hard link to %q: %w", hdr.Linkname, err)
		}
		if via := belowSymlink(target, symlinks); via != "" {
			return fmt.Errorf("hard link to %q passes through the symlink %q", hdr.Linkname, via)
		}
	default:
		return fmt.Errorf("unsupported entry type %q", string(hdr.Typeflag))
	}
	return nil
}

// belowSymlink returns the symlink among the directories above name, or "".
func belowSymlink(name string, symlinks map[string]bool) string {
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if symlinks[dir] {
			return dir
		}
	}
	return ""
}

// entryChecker applies CheckArchive's rules to listed entries one at a time, in listing
// order. It holds the symlinks seen, not the entries.
type entryChecker map[string]bool

func (symlinks entryChecker) check(e *Entry) error {
	hdr := &tar.Header{Name: e.Path, Typeflag: tar.TypeReg}
	switch e.Kind {
	case KindDir:
		hdr.Typeflag = tar.TypeDir
	case KindSymlink:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.LinkTarget
	}
	if e.Path == "." && e.Kind == KindDir {
		return nil
	}
	if err := checkEntry(hdr, symlinks); err != nil {
		return &contextError{fmt.Sprintf("%s: %v", e.Path, err), ErrUnsafeArchive}
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
	for rest := name; rest != ""; {
		part, after, _ := strings.Cut(rest, "/")
		if part == ".." {
			return "", errors.New(`name contains ".."`)
		}
		rest = after
	}
	return path.Clean(name), nil
}

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
