package buildcontext

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/klauspost/compress/gzip"
)

// archiveModTime is the one mtime every archive entry carries (2000-01-01T00:00:00Z).
var archiveModTime = time.Unix(946684800, 0).UTC()

// WriteArchive writes the gzip'd tar of the listing to w (design/hashing.md §5): entries in
// listing order, uid = gid = 0, no user or group names, one fixed mtime, modes normalised.
// The listing must carry file digests (PortableHash, SDKHash or ComputeDigests); each file
// is checked against its size and digest while it is copied, and a mismatch fails with
// ErrChanged naming the file, after which what was written to w must be discarded.
func (l *Listing) WriteArchive(ctx context.Context, w io.Writer) error {
	for i := range l.Entries {
		if e := &l.Entries[i]; e.Kind == KindFile && !e.HasDigest() {
			return &contextError{fmt.Sprintf("archiving %s: %s has no digest; hash the listing first", l.Src, e.Path), ErrNotDigested}
		}
	}
	gz, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	for i := range l.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := writeArchiveEntry(ctx, tw, &l.Entries[i], l.sourcePath); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("archiving %s: %w", l.Src, err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("archiving %s: %w", l.Src, err)
	}
	return nil
}

func writeArchiveEntry(ctx context.Context, tw *tar.Writer, e *Entry, sourcePath func(*Entry) string) error {
	hdr := &tar.Header{
		Name:    e.Path,
		Mode:    int64(e.normalisedPerm()),
		ModTime: archiveModTime,
	}
	switch e.Kind {
	case KindDir:
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
	case KindSymlink:
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = e.LinkTarget
	case KindFile:
		hdr.Typeflag = tar.TypeReg
		hdr.Size = e.Size
	}
	if e.Kind != KindFile {
		return tw.WriteHeader(hdr)
	}
	f, err := openContent(sourcePath(e))
	if err != nil {
		return fmt.Errorf("archiving %s: %w", e.Path, err)
	}
	defer f.Close()
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("archiving %s: %w", e.Path, err)
	}
	h := sha256.New()
	// One byte more than expected is read, so a file that grew is caught.
	n, err := copyWithContext(ctx, io.MultiWriter(tw, h), io.LimitReader(f, e.Size+1))
	if errors.Is(err, tar.ErrWriteTooLong) || (err == nil && n != e.Size) {
		return changedSincePlan(e.Path, "its size changed")
	}
	if err != nil {
		return fmt.Errorf("archiving %s: %w", e.Path, err)
	}
	if [sha256.Size]byte(h.Sum(nil)) != e.SHA256 {
		return changedSincePlan(e.Path, "its content changed")
	}
	return nil
}

func changedSincePlan(path, what string) error {
	return &contextError{fmt.Sprintf("build context changed since plan: %s (%s); run plan again", path, what), ErrChanged}
}

// SpoolArchive writes the archive to a new temporary file in dir (os.TempDir() when
// empty) and returns its path and exact size, for an upload that needs a Content-Length.
// The caller removes the file. On error nothing is left behind.
func (l *Listing) SpoolArchive(ctx context.Context, dir string) (path string, size int64, err error) {
	f, err := os.CreateTemp(dir, "e2b-context-*.tar.gz")
	if err != nil {
		return "", 0, fmt.Errorf("creating the archive file for %s: %w", l.Src, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 256<<10)
	if err := l.WriteArchive(ctx, bw); err != nil {
		return "", 0, err
	}
	if err := bw.Flush(); err != nil {
		return "", 0, fmt.Errorf("writing archive %s: %w", f.Name(), err)
	}
	fi, err := f.Stat()
	if err != nil {
		return "", 0, fmt.Errorf("writing archive %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return "", 0, fmt.Errorf("writing archive %s: %w", f.Name(), err)
	}
	return f.Name(), fi.Size(), nil
}
