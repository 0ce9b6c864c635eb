package buildcontext

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// ArchiveCheck is the files hash a plan found for a step, in the step's hash mode, which
// WriteStepArchive checks the files it archives against.
type ArchiveCheck struct {
	// PortableHash is the portable hash (StreamPortableHash), in the portable mode.
	PortableHash string
	// SDKHash is the SDK-compatible hash (StreamSDKHash), in the e2b-sdk mode. That hash
	// reads the files' bytes in the SDK's order, not the archive's, so the archive digests
	// what it wrote by file digest (the fingerprint) and takes the hash the plan's
	// StreamSDKHash cached under that fingerprint in Cache. Only when Cache (nil: none)
	// lacks it, as on another machine than the plan's, is the step hashed again.
	SDKHash string
	Cache   *StatCache
}

// ChangedError is WriteStepArchive's finding that the files it archived do not have the
// hash planned. It matches ErrChanged.
type ChangedError struct {
	Src string
	// Planned and Found are the files hashes planned and found.
	Planned, Found string
	// Newest are the files modified last (absolute paths, newest first, at most
	// NewestKept): the likely culprits.
	Newest []string
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("build context changed since plan: the files of %s hash to %s, planned %s "+
		"(most recently modified: %s); run plan again", e.Src, e.Found, e.Planned, strings.Join(e.Newest, ", "))
}

// Is makes a ChangedError match ErrChanged.
func (e *ChangedError) Is(target error) bool { return target == ErrChanged }

// WriteStepArchive writes the archive of the step (src, dest) (design/hashing.md "Archive")
// over what Walk lists, without holding the listing: the walk of the context that an apply
// makes, which checks that what it archived has the hash planned (ArchiveCheck). A file
// whose size changed fails naming it; other changes, which only the hash shows, fail with
// a *ChangedError naming the files modified last. Both are ErrChanged, after which what
// was written to w must be discarded.
func WriteStepArchive(ctx context.Context, w io.Writer, contextDir, src, dest string, lo ListOptions, planned ArchiveCheck) error {
	root, err := contextRoot(contextDir)
	if err != nil {
		return err
	}
	a, err := newArchiveWriter(w)
	if err != nil {
		return err
	}
	portable, want := newPortableHasher(src, dest), planned.PortableHash
	var fingerprint *sdkWalkFingerprint
	if planned.SDKHash != "" {
		fingerprint, want = newSDKWalkFingerprint(src, dest), planned.SDKHash
	}
	var sum StreamSummary
	if err := walkStep(root, src, lo, &sum, func(e *Entry) error {
		fileDigest, err := a.write(ctx, e, sourcePath(root, e))
		if err != nil {
			return err
		}
		e.setDigest(fileDigest)
		if fingerprint != nil {
			fingerprint.add(e)
		} else {
			portable.add(e)
		}
		return nil
	}); err != nil {
		return err
	}
	var found string
	if fingerprint == nil {
		found = portable.sum()
	} else if found, err = sdkHashOf(ctx, root, src, dest, lo, planned.Cache, fingerprint.fingerprint()); err != nil {
		return err
	}
	if found != want {
		return &ChangedError{Src: src, Planned: want, Found: found, Newest: sum.Newest}
	}
	return a.close(src)
}

// sdkHashOf is the SDK-compatible hash of the step whose archive has the given
// fingerprint: the one cached under it, else that of a new StreamSDKHash, which must
// find the files the archive holds.
func sdkHashOf(ctx context.Context, root, src, dest string, lo ListOptions, cache *StatCache, fingerprint [32]byte) (string, error) {
	if hash, ok := cache.stepHash(fingerprint); ok {
		return hex.EncodeToString(hash[:]), nil
	}
	sum, err := StreamSDKHash(ctx, root, src, dest, lo, HashOptions{Cache: cache})
	if err != nil {
		return "", err
	}
	if sum.Fingerprint != hex.EncodeToString(fingerprint[:]) {
		return "", &contextError{fmt.Sprintf("build context changed while it was archived: the files of %s "+
			"(most recently modified: %s); run plan again", src, strings.Join(sum.Newest, ", ")), ErrChanged}
	}
	return sum.Hash, nil
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
