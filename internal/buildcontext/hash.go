package buildcontext

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"strconv"
	"time"
)

// portableHasher is the portable hash of a step fed one entry at a time, in listing
// order (design/hashing.md "Portable files hash").
type portableHasher struct {
	h   hash.Hash
	buf []byte // each entry's netstrings, appended and written at once
}

func newPortableHasher(src, dest string) *portableHasher {
	h, buf := newStepDigest("e2b-files-v1", src, dest)
	return &portableHasher{h: h, buf: buf}
}

// newStepDigest is a sha256 fed the netstrings of version, src and dest, with which both
// digests of a step's entries start, and the buffer that held them, for the entries.
func newStepDigest(version, src, dest string) (hash.Hash, []byte) {
	h := sha256.New()
	buf := appendNetstring(nil, version)
	buf = appendNetstring(buf, src)
	buf = appendNetstring(buf, dest)
	h.Write(buf)
	return h, buf
}

// add feeds e, whose digest is set if it is a file.
func (p *portableHasher) add(e *Entry) {
	buf := appendNetstring(p.buf[:0], portableKind[e.Kind])
	buf = appendNetstring(buf, permString(e.normalisedPerm()))
	buf = appendNetstring(buf, e.Path)
	switch e.Kind {
	case KindFile:
		buf = appendHexNetstring(buf, e.SHA256)
	case KindDir:
		buf = appendNetstring(buf, "")
	case KindSymlink:
		buf = appendNetstring(buf, e.LinkTarget)
	}
	p.h.Write(buf)
	p.buf = buf
}

func (p *portableHasher) sum() string { return hex.EncodeToString(p.h.Sum(nil)) }

func permString(p fs.FileMode) string {
	switch p {
	case 0o755:
		return "0755"
	case 0o777:
		return "0777"
	}
	return "0644"
}

var portableKind = [...]string{KindFile: "f", KindDir: "d", KindSymlink: "l"}

// appendHexNetstring appends the netstring of sum in lowercase hex.
func appendHexNetstring(b []byte, sum [sha256.Size]byte) []byte {
	b = strconv.AppendInt(b, 2*sha256.Size, 10)
	b = append(b, ':')
	b = hex.AppendEncode(b, sum[:])
	return append(b, ',')
}

// appendNetstring appends len(s) ":" s ",".
func appendNetstring(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	b = append(b, s...)
	return append(b, ',')
}

// sdkHasher is the files hash the E2B JS SDK computes for a step (design/e2b-api.md "Files hash"),
// fed the entries in the SDK's order (sdkOrder), so uploads can be shared with SDK users.
// Differences kept on purpose: entries come from this package's walk (Docker
// .dockerignore semantics, where the SDK's glob keeps the children of an ignored
// directory), and a symlink's target is used only when the walk resolved it. Directory
// sizes make it filesystem-dependent. It runs over the file bytes themselves, so it cannot
// be made of file digests: it reads every file on one core, and digests it on a second
// (sideWriter) for the fingerprint (sdkFingerprinter) and the digest cache.
type sdkHasher struct {
	h    hash.Hash
	side *sideWriter
	buf  []byte // each entry's fields, appended and written at once
}

func newSDKHasher(src, dest string) *sdkHasher {
	s := &sdkHasher{h: sha256.New(), side: newSideWriter()}
	// hash.Hash's Write never returns an error.
	s.h.Write([]byte("COPY " + src + " " + dest))
	return s
}

// add feeds e, listed in the context root, reading it if it is a file, whose digest it
// then sets.
func (s *sdkHasher) add(ctx context.Context, root string, e *Entry, cache *StatCache) error {
	name := e.Path
	if name == "." {
		name = "" // the SDK names the context itself by its relative path, ""
	}
	buf := append(s.buf[:0], name...)
	buf = strconv.AppendUint(buf, uint64(e.ID.Mode), 10)
	buf = strconv.AppendInt(buf, e.Size, 10)
	if e.Kind == KindSymlink {
		buf = append(buf, e.LinkTarget...)
	}
	s.h.Write(buf)
	s.buf = buf
	if e.Kind != KindFile {
		return nil
	}
	return s.hashFile(ctx, sourcePath(root, e), e, cache)
}

// hashFile feeds a file's bytes into the step hash and its own digest at once. It checks
// the file as hashFile does and the digest against the cached one, and caches a new one.
func (s *sdkHasher) hashFile(ctx context.Context, path string, e *Entry, cache *StatCache) error {
	f, err := openContent(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", e.Path, err)
	}
	defer f.Close()
	cached, isCached := cache.digest(e)
	readAt := time.Now()
	fileHash := sha256.New()
	s.side.w = fileHash
	// As in hashFile: exactly the listed size, then the identity check.
	n, err := copyWithContext(ctx, teeWriter{s.h, s.side}, io.LimitReader(f, e.Size))
	if err != nil {
		return fmt.Errorf("reading %s: %w", e.Path, err)
	}
	after, err := f.identity()
	if err != nil {
		return fmt.Errorf("reading %s: %w", e.Path, err)
	}
	if after != e.ID || n != e.Size {
		return changedError(e.Path, "since it was listed")
	}
	var sum [32]byte
	fileHash.Sum(sum[:0])
	switch {
	case isCached && cached != sum:
		return changedError(e.Path, "since it was hashed")
	case !isCached:
		cacheDigest(cache, e, readAt, sum)
	}
	e.setDigest(sum)
	return nil
}

func (s *sdkHasher) sum() [32]byte {
	var sum [32]byte
	s.h.Sum(sum[:0])
	return sum
}

func (s *sdkHasher) close() { s.side.close() }

// sdkFingerprinter digests what the SDK-compatible hash of the step (src, dest) depends
// on, fed the entries in the SDK's order (sdkOrder) with their file digests: per entry its
// path, kind, st_mode, st_size and link target or file digest (design/hashing.md "E2B SDK-compatible files hash"). It
// names a file's content by its digest, so cached digests stand for the files' bytes: it
// is the key under which the digest cache keeps the step hash.
type sdkFingerprinter struct {
	h   hash.Hash
	buf []byte
}

func newSDKFingerprinter(src, dest string) *sdkFingerprinter {
	h, buf := newStepDigest("e2b-sdk-step-v2", src, dest)
	return &sdkFingerprinter{h: h, buf: buf}
}

// add feeds e, whose digest is set if it is a file.
func (f *sdkFingerprinter) add(e *Entry) {
	buf := appendNetstring(f.buf[:0], e.Path)
	buf = append(buf, byte(e.Kind))
	buf = strconv.AppendUint(buf, uint64(e.ID.Mode), 10)
	buf = append(buf, ' ')
	buf = strconv.AppendInt(buf, e.Size, 10)
	buf = append(buf, ',')
	buf = appendNetstring(buf, e.LinkTarget)
	buf = appendHexNetstring(buf, e.SHA256)
	f.h.Write(buf)
	f.buf = buf
}

func (f *sdkFingerprinter) sum() [32]byte {
	var sum [32]byte
	f.h.Sum(sum[:0])
	return sum
}

// sdkOrder passes the entries of the walk on to next in the SDK's order: by absolute
// path, which is the walk's order except that the context's own entry "." comes first,
// where the walk yields it after the root names that sort before "." as bytes (such as
// "-x" and "#x", with everything below them). It holds those until "." arrives, or an
// entry sorting after "." shows that it will not, or the walk ends (end): what it holds
// grows with those early root subtrees alone, rare in a build context, not with the tree.
type sdkOrder struct {
	next    func(*Entry) error
	held    []Entry
	passing bool // "." was passed on or will not come
}

func (o *sdkOrder) add(e *Entry) error {
	switch {
	case o.passing:
		return o.next(e)
	case e.Path < ".":
		o.held = append(o.held, *e)
		return nil
	case e.Path == ".":
		if err := o.next(e); err != nil {
			return err
		}
		return o.end()
	}
	if err := o.end(); err != nil {
		return err
	}
	return o.next(e)
}

// end passes on what is held; call it when the walk ends.
func (o *sdkOrder) end() error {
	o.passing = true
	for i := range o.held {
		if err := o.next(&o.held[i]); err != nil {
			return err
		}
	}
	o.held = nil
	return nil
}

// sdkWalkFingerprint is the sdkFingerprinter of entries fed in the walk's order.
type sdkWalkFingerprint struct {
	fp    *sdkFingerprinter
	order sdkOrder
}

func newSDKWalkFingerprint(src, dest string) *sdkWalkFingerprint {
	f := &sdkWalkFingerprint{fp: newSDKFingerprinter(src, dest)}
	f.order.next = func(e *Entry) error { f.fp.add(e); return nil }
	return f
}

// add feeds e, whose digest is set if it is a file.
func (f *sdkWalkFingerprint) add(e *Entry) { _ = f.order.add(e) } // next never fails

// fingerprint is the fingerprint, once the walk has ended.
func (f *sdkWalkFingerprint) fingerprint() [32]byte {
	_ = f.order.end() // next never fails
	return f.fp.sum()
}

// sideWriter writes to the hash w on its own goroutine; write returns once w has the
// bytes, so the caller may reuse the buffer and change w between writes.
type sideWriter struct {
	w    hash.Hash
	in   chan []byte
	done chan struct{}
}

func newSideWriter() *sideWriter {
	s := &sideWriter{in: make(chan []byte), done: make(chan struct{})}
	go func() {
		for p := range s.in {
			s.w.Write(p) // hash.Hash's Write never returns an error
			s.done <- struct{}{}
		}
	}()
	return s
}

func (s *sideWriter) close() { close(s.in) }

// teeWriter writes p to main and, in parallel, to side.
type teeWriter struct {
	main io.Writer
	side *sideWriter
}

func (t teeWriter) Write(p []byte) (int, error) {
	t.side.in <- p
	n, err := t.main.Write(p)
	<-t.side.done
	return n, err
}
