package runtime

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// ArchiveLimits bound what CheckArchive reads; zero means no limit.
type ArchiveLimits struct {
	MaxUnpackedBytes int64
	MaxEntries       int
}

// errUnpackedTooLarge stops CheckArchive at ArchiveLimits.MaxUnpackedBytes.
var errUnpackedTooLarge = errors.New("unpacked size limit reached")

// limitedReader fails once more than left bytes were read.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if l.left -= int64(n); l.left < 0 {
		return n, errUnpackedTooLarge
	}
	return n, err
}

// CheckArchive reads a build-context archive (gzip-compressed or plain
// tar) to its end within limits and rejects, naming the entry, anything
// that could land outside the directory it is extracted into: absolute
// names, ".." components, entries below a symlink of the archive, symlinks
// to absolute paths or out of the root, hard links to such names, and
// entries other than files, directories and links. It reports whether the
// archive is gzip-compressed. Nothing is extracted.
func CheckArchive(r io.Reader, limits ArchiveLimits) (gzipped bool, err error) {
	br := bufio.NewReader(r)
	var stream io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gzipped = true
		zr, err := gzip.NewReader(br)
		if err != nil {
			return true, fmt.Errorf("archive is not valid gzip: %w", err)
		}
		defer zr.Close()
		stream = zr
	}
	if limits.MaxUnpackedBytes > 0 {
		stream = &limitedReader{r: stream, left: limits.MaxUnpackedBytes}
	}
	tr := tar.NewReader(stream)
	// Names that were symlinks at any point: tar may write through them, so
	// nothing may lie below them, even after a later entry replaced them.
	symlinks := map[string]bool{}
	for entries := 0; ; entries++ {
		hdr, err := tr.Next()
		switch {
		case errors.Is(err, io.EOF) && entries == 0:
			return gzipped, errors.New("archive has no entries")
		case errors.Is(err, io.EOF):
			return gzipped, nil
		case errors.Is(err, errUnpackedTooLarge):
			return gzipped, fmt.Errorf("archive unpacks to more than the limit of %d bytes", limits.MaxUnpackedBytes)
		case err != nil:
			return gzipped, fmt.Errorf("archive is not a valid tar: %w", err)
		}
		if limits.MaxEntries > 0 && entries >= limits.MaxEntries {
			return gzipped, fmt.Errorf("archive has more than the limit of %d entries", limits.MaxEntries)
		}
		if err := checkEntry(hdr, symlinks); err != nil {
			return gzipped, fmt.Errorf("archive entry %q: %w", hdr.Name, err)
		}
	}
}

// checkEntry checks one entry against the names seen so far.
func checkEntry(hdr *tar.Header, symlinks map[string]bool) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // metadata only; tar writes nothing for it
	}
	name, err := archiveName(hdr.Name)
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
			return fmt.Errorf("symlink to the absolute path %q leaves the copied files", hdr.Linkname)
		}
		if escapes(path.Join(path.Dir(name), hdr.Linkname)) {
			return fmt.Errorf("symlink to %q leaves the copied files", hdr.Linkname)
		}
		symlinks[name] = true
	case tar.TypeLink:
		if _, err := archiveName(hdr.Linkname); err != nil {
			return fmt.Errorf("hard link to %q: %w", hdr.Linkname, err)
		}
	default:
		return fmt.Errorf("unsupported entry type %q", string(hdr.Typeflag))
	}
	return nil
}

// archiveName checks an entry name and returns it cleaned.
func archiveName(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty name")
	}
	if strings.HasPrefix(name, "/") {
		return "", errors.New("absolute name")
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", errors.New(`name contains ".."`)
		}
	}
	return path.Clean(name), nil
}

func escapes(p string) bool { return p == ".." || strings.HasPrefix(p, "../") }

// nonGlobPrefix is the part of a COPY source before its first glob
// component: "src/*.js" → "src", "app" → "app", "*.txt" → ".".
func nonGlobPrefix(src string) (string, error) {
	clean := path.Clean(strings.TrimPrefix(src, "./"))
	if path.IsAbs(clean) || escapes(clean) {
		return "", fmt.Errorf("source %q is outside the build context", src)
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
// archive is checked, uploaded through envd, extracted by a process in the
// container and placed with Docker's COPY semantics.
func (b *builder) copy(ctx context.Context, step string, st e2bapi.TemplateStep) error {
	args := append(append([]string(nil), st.Args...), "", "", "", "")[:4]
	src, dest, owner, mode := args[0], args[1], args[2], args[3]
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
	gzipped, err := checkArchiveFile(archive)
	if err != nil {
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

	staging := "/.e2b/copy/" + step
	f, err := os.Open(archive)
	if err != nil {
		return fmt.Errorf("stored files for hash %s: %w", st.FilesHash, err)
	}
	err = b.c.envd.upload(ctx, staging+"/files.tar", f)
	f.Close()
	if err != nil {
		return err
	}
	flags := "-xf"
	if gzipped {
		flags = "-xzf"
	}
	if _, err := b.root(ctx, "extracting the files", `mkdir -p "$1/unpack" && tar `+flags+` "$1/files.tar" -C "$1/unpack"`, staging); err != nil {
		return err
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

// checkArchiveFile runs CheckArchive on a stored archive: never trust a
// file because an earlier check passed.
func checkArchiveFile(name string) (gzipped bool, err error) {
	f, err := os.Open(name)
	if err != nil {
		return false, fmt.Errorf("stored files: %w", err)
	}
	defer f.Close()
	return CheckArchive(f, ArchiveLimits{})
}

func boolFlag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
