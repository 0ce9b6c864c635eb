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
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
)

// archiveModTime is the one mtime every archive entry carries (2000-01-01T00:00:00Z).
var archiveModTime = time.Unix(946684800, 0).UTC()

// ArchiveCheck is what WriteStepArchive checks the files it archived against: what the
// hash of the step found, in the step's hash mode.
type ArchiveCheck struct {
	// PortableHash is the portable hash (StreamPortableHash), in the portable mode.
	PortableHash string
	// SDKFingerprint is StreamSummary.Fingerprint of StreamSDKHash, in the e2b-sdk mode:
	// it names the files by digest, which the archive computes as it writes them, where
	// the SDK's hash would read them a second time.
	SDKFingerprint string
}

// stepDigest digests a step's entries fed in the walk's order with their file digests:
// the portable hash (portableHasher) or the fingerprint of the SDK-compatible hash
// (sdkWalkFingerprint), in hex.
type stepDigest interface {
	add(*Entry)
	sum() string
}

// WriteStepArchive writes the archive of the step (src, dest) (design/hashing.md "Archive") over what Walk lists, without
// holding the listing: it walks the context again and checks that what it archived is
// what was planned (ArchiveCheck: SDKFingerprint when set, else PortableHash). A file
// whose size changed fails naming it; other changes, which only the hash or fingerprint
// shows, fail naming the files modified last. Both are ErrChanged, after which what was
// written to w must be discarded.
func WriteStepArchive(ctx context.Context, w io.Writer, contextDir, src, dest string, lo ListOptions, planned ArchiveCheck) error {
	root, err := contextRoot(contextDir)
	if err != nil {
		return err
	}
	a, err := newArchiveWriter(w)
	if err != nil {
		return err
	}
	var digest stepDigest = newPortableHasher(src, dest)
	what, want := "hash to", planned.PortableHash
	if planned.SDKFingerprint != "" {
		digest, what, want = newSDKWalkFingerprint(src, dest), "have the e2b-sdk fingerprint", planned.SDKFingerprint
	}
	var sum StreamSummary
	if err := walkStep(root, src, lo, &sum, func(e *Entry) error {
		fileDigest, err := a.write(ctx, e, sourcePath(root, e))
		if err != nil {
			return err
		}
		e.setDigest(fileDigest)
		digest.add(e)
		return nil
	}); err != nil {
		return err
	}
	if got := digest.sum(); got != want {
		return &contextError{fmt.Sprintf("build context changed since plan: the files of %s %s %s, planned %s "+
			"(most recently modified: %s); run plan again", src, what, got, want, strings.Join(sum.Newest, ", ")), ErrChanged}
	}
	return a.close(src)
}

// archiveWriter writes the entries of one archive.
type archiveWriter struct {
	gz *gzip.Writer
	tw *tar.Writer
}

func newArchiveWriter(w io.Writer) (*archiveWriter, error) {
	gz, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	return &archiveWriter{gz: gz, tw: tar.NewWriter(gz)}, nil
}

// write adds e, read from path if it is a file, and returns the digest of what it read;
// a file whose size is not the listed one is an error naming it.
func (a *archiveWriter) write(ctx context.Context, e *Entry, path string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	if err := ctx.Err(); err != nil {
		return sum, err
	}
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
		return sum, a.tw.WriteHeader(hdr)
	}
	f, err := openContent(path)
	if err != nil {
		return sum, fmt.Errorf("archiving %s: %w", e.Path, err)
	}
	defer f.Close()
	if err := a.tw.WriteHeader(hdr); err != nil {
		return sum, fmt.Errorf("archiving %s: %w", e.Path, err)
	}
	h := sha256.New()
	// One byte more than expected is read, so a file that grew is caught.
	n, err := copyWithContext(ctx, io.MultiWriter(a.tw, h), io.LimitReader(f, e.Size+1))
	if errors.Is(err, tar.ErrWriteTooLong) || (err == nil && n != e.Size) {
		return sum, changedSincePlan(e.Path, "its size changed")
	}
	if err != nil {
		return sum, fmt.Errorf("archiving %s: %w", e.Path, err)
	}
	h.Sum(sum[:0])
	return sum, nil
}

func (a *archiveWriter) close(src string) error {
	if err := a.tw.Close(); err != nil {
		return fmt.Errorf("archiving %s: %w", src, err)
	}
	if err := a.gz.Close(); err != nil {
		return fmt.Errorf("archiving %s: %w", src, err)
	}
	return nil
}

func changedSincePlan(path, what string) error {
	return &contextError{fmt.Sprintf("build context changed since plan: %s (%s); run plan again", path, what), ErrChanged}
}

// SpoolArchive spools the archive of the COPY source src that write writes, as
// an upload needs it.
func SpoolArchive(dir, src string, write func(io.Writer) error) (path string, size int64, err error) {
	f, err := os.CreateTemp(dir, "e2b-context-*.tar.gz")
	if err != nil {
		return "", 0, fmt.Errorf("creating the archive file for %s: %w", src, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 256<<10)
	if err := write(bw); err != nil {
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
