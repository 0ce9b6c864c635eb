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

// PortableHash is the portable files hash v1 of the COPY step (Src, dest) over this
// listing (design/hashing.md §2). It computes the missing file digests first (see
// ComputeDigests), which also prepares the listing for the archive.
func (l *Listing) PortableHash(ctx context.Context, dest string, opts HashOptions) (string, error) {
	if _, err := l.ComputeDigests(ctx, opts); err != nil {
		return "", err
	}
	h := newPortableHasher(l.Src, dest)
	for i := range l.Entries {
		h.add(&l.Entries[i])
	}
	return h.sum(), nil
}

// portableHasher is the portable hash of a step fed one entry at a time, in listing
// order (design/hashing.md §2).
type portableHasher struct {
	h   hash.Hash
	buf []byte // each entry's netstrings, appended and written at once
}

func newPortableHasher(src, dest string) *portableHasher {
	p := &portableHasher{h: sha256.New()}
	p.buf = appendNetstring(p.buf, "e2b-files-v1")
	p.buf = appendNetstring(p.buf, src)
	p.buf = appendNetstring(p.buf, dest)
	p.h.Write(p.buf)
	return p
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

// SDKHash is the files hash the E2B JS SDK computes for the step (design/e2b-api.md §2), so
// uploads can be shared with SDK users. Differences kept on purpose: entries come from
// this package's listing (Docker .dockerignore semantics, where the SDK's glob keeps the
// children of an ignored directory), and a symlink's target is used only when the listing
// resolved it. Directory sizes make it filesystem-dependent. Like the SDK it orders
// entries by absolute path (the context itself first, named ""), and it sets the SHA256
// of every file it reads, so the archive can check the files again.
//
// The SDK's hash runs over the file bytes themselves, so it cannot be made of file
// digests. With opts.Cache it is cached instead under a fingerprint of everything it
// covers (sdkFingerprint, which names each file's content by its digest): when the cache
// holds the digest of every file and the hash of that fingerprint, no file is read.
func (l *Listing) SDKHash(ctx context.Context, dest string, opts HashOptions) (string, error) {
	if opts.Cache != nil {
		opts.Cache.fill(l.Entries)
		if fingerprint, ok := l.sdkFingerprint(dest); ok {
			if sum, ok := opts.Cache.stepHash(fingerprint); ok {
				return hex.EncodeToString(sum[:]), nil
			}
		}
	}
	h := sha256.New()
	// hash.Hash's Write never returns an error.
	h.Write([]byte("COPY " + l.Src + " " + dest))
	// File bytes feed the step hash here and each file's own digest on a second core.
	side := newSideWriter()
	defer side.close()
	for _, i := range l.sdkOrder() {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		e := &l.Entries[i]
		name := e.Path
		if name == "." {
			name = ""
		}
		h.Write([]byte(name))
		h.Write(strconv.AppendUint(nil, uint64(e.ID.Mode), 10))
		h.Write(strconv.AppendInt(nil, e.Size, 10))
		switch e.Kind {
		case KindSymlink:
			h.Write([]byte(e.LinkTarget))
		case KindFile:
			if err := sdkHashFile(ctx, h, side, l.sourcePath(e), e, opts.Cache); err != nil {
				return "", err
			}
		}
	}
	var sum [32]byte
	h.Sum(sum[:0])
	if opts.Cache != nil {
		fingerprint, _ := l.sdkFingerprint(dest) // every file has its digest now
		opts.Cache.storeStepHash(fingerprint, sum)
	}
	return hex.EncodeToString(sum[:]), nil
}

// sdkFingerprint digests what the SDK-compatible hash of the step (Src, dest) depends on:
// per entry in listing order its path, kind, st_mode, st_size and link target or file
// digest. It reports false while a file lacks its digest.
func (l *Listing) sdkFingerprint(dest string) ([32]byte, bool) {
	h := sha256.New()
	buf := appendNetstring(nil, "e2b-sdk-step-v1")
	buf = appendNetstring(buf, l.Src)
	buf = appendNetstring(buf, dest)
	h.Write(buf)
	for i := range l.Entries {
		e := &l.Entries[i]
		if e.Kind == KindFile && !e.HasDigest() {
			return [32]byte{}, false
		}
		buf = appendNetstring(buf[:0], e.Path)
		buf = append(buf, byte(e.Kind))
		buf = strconv.AppendUint(buf, uint64(e.ID.Mode), 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, e.Size, 10)
		buf = append(buf, ',')
		buf = appendNetstring(buf, e.LinkTarget)
		buf = appendHexNetstring(buf, e.SHA256)
		h.Write(buf)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum, true
}

// sdkOrder is the SDK's order: by absolute path, which puts the context itself first.
func (l *Listing) sdkOrder() []int {
	order := make([]int, 0, len(l.Entries))
	for i := range l.Entries {
		if l.Entries[i].Path == "." {
			order = append([]int{i}, order...)
		} else {
			order = append(order, i)
		}
	}
	return order
}

// sdkHashFile feeds a file's bytes into the step hash and its own digest at once, which
// it caches as hashFile does.
func sdkHashFile(ctx context.Context, h hash.Hash, side *sideWriter, path string, e *Entry, cache *StatCache) error {
	f, err := openContent(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", e.Path, err)
	}
	defer f.Close()
	readAt := time.Now()
	fileHash := sha256.New()
	side.w = fileHash
	// As in hashFile: exactly the listed size, then the identity check.
	n, err := copyWithContext(ctx, teeWriter{h, side}, io.LimitReader(f, e.Size))
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
	if e.HasDigest() && e.SHA256 != sum {
		return changedError(e.Path, "since it was hashed")
	}
	if !e.HasDigest() {
		cacheDigest(cache, e, readAt, sum)
	}
	e.setDigest(sum)
	return nil
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
