package buildcontext

// The listing: every entry of a COPY source held at once, as List returns it. The code
// streams instead (Walk, StreamPortableHash, StreamSDKHash, WriteStepArchive); the tests
// keep the listing as the plain form of the same rules, to check the streams against.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
)

// Listing is the result of listing one COPY source: entries sorted by Path as bytes.
type Listing struct {
	Context string // absolute, symlinks in it resolved
	Src     string // the COPY source exactly as given
	Entries []Entry
}

// sourcePath is the file to read for e.
func (l *Listing) sourcePath(e *Entry) string { return sourcePath(l.Context, e) }

// List lists the entries the COPY source src takes from contextDir, following
// design/hashing.md §1: src is relative and stays inside the context; .dockerignore and
// opts.IgnorePatterns exclude entries with Docker's semantics; src may be a glob (`*`, `?`,
// `[...]`, `**`; dotfiles match); a matched directory brings itself and everything below
// it; symlinks are never followed (see ListOptions.ResolveLinks); sockets, FIFOs and
// devices are errors unless ignored; an empty result is an error. It holds every entry;
// Walk gives the same entries one at a time.
func List(contextDir, src string, opts ListOptions) (*Listing, error) {
	var entries []Entry
	root, err := Walk(contextDir, src, opts, func(e *Entry) error {
		// Double the capacity when full: append grows a large slice by only 1.25×, which
		// copies a listing of many entries about five times over.
		if len(entries) == cap(entries) {
			entries = slices.Grow(entries, max(len(entries), 256))
		}
		entries = append(entries, *e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Listing{Context: root, Src: src, Entries: entries}, nil
}

// WriteArchive writes the gzip'd tar of the listing to w (design/hashing.md §5): entries in
// listing order, uid = gid = 0, no user or group names, one fixed mtime, modes normalised.
// The listing must carry file digests (PortableHash or ComputeDigests); each file
// is checked against its size and digest while it is copied, and a mismatch fails with
// ErrChanged naming the file, after which what was written to w must be discarded.
func (l *Listing) WriteArchive(ctx context.Context, w io.Writer) error {
	for i := range l.Entries {
		if e := &l.Entries[i]; e.Kind == KindFile && !e.HasDigest() {
			return &contextError{fmt.Sprintf("archiving %s: %s has no digest; hash the listing first", l.Src, e.Path), ErrNotDigested}
		}
	}
	a, err := newArchiveWriter(w)
	if err != nil {
		return err
	}
	for i := range l.Entries {
		e := &l.Entries[i]
		sum, err := a.write(ctx, e, l.sourcePath(e))
		if err != nil {
			return err
		}
		if e.Kind == KindFile && sum != e.SHA256 {
			return changedSincePlan(e.Path, "its content changed")
		}
	}
	return a.close(l.Src)
}

// SpoolArchive writes the archive to a new temporary file in dir (os.TempDir() when
// empty) and returns its path and exact size, for an upload that needs a Content-Length.
// The caller removes the file. On error nothing is left behind.
func (l *Listing) SpoolArchive(ctx context.Context, dir string) (path string, size int64, err error) {
	return SpoolArchive(dir, l.Src, func(w io.Writer) error { return l.WriteArchive(ctx, w) })
}

// CheckEntries applies CheckArchive's rules to the entries of the listing's archive, so
// that a plan refuses what the server would refuse, naming the entry.
func (l *Listing) CheckEntries() error {
	check := entryChecker{}
	for i := range l.Entries {
		if err := check.check(&l.Entries[i]); err != nil {
			return err
		}
	}
	return nil
}

// ComputeDigests sets SHA256 on every file entry that lacks it, from the cache where the
// stat identity matches and otherwise by reading the file, several files in parallel.
// A file whose identity differs from the listing's, or that changes while it is read,
// is an error naming it.
func (l *Listing) ComputeDigests(ctx context.Context, opts HashOptions) (DigestStats, error) {
	var stats DigestStats
	if opts.Cache != nil {
		stats.Cached = opts.Cache.fill(l.Entries)
	}
	var todo []*Entry
	for i := range l.Entries {
		e := &l.Entries[i]
		if e.Kind != KindFile || e.HasDigest() {
			continue
		}
		todo = append(todo, e)
		stats.Read++
		stats.BytesRead += e.Size
	}
	if len(todo) == 0 {
		return stats, nil
	}
	// Largest first, so the big files spread across workers and the small ones fill in.
	slices.SortStableFunc(todo, func(a, b *Entry) int { return cmp.Compare(b.Size, a.Size) })

	d := startDigester(ctx, opts, len(todo), 0)
	for _, e := range todo {
		if !d.submit(e, l.sourcePath(e), nil) {
			break
		}
	}
	return stats, d.wait()
}

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

// Newest is the absolute paths of the n most recently modified files, newest first.
func (l *Listing) Newest(n int) []string {
	newest := newestFiles{n: n}
	for i := range l.Entries {
		newest.add(&l.Entries[i])
	}
	return newest.paths(l.Context)
}

// fill sets SHA256 on the file entries lacking it whose digest the cache holds, and
// returns how many it set.
func (c *StatCache) fill(entries []Entry) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	found := 0
	for i := range entries {
		e := &entries[i]
		if e.Kind != KindFile || e.HasDigest() {
			continue
		}
		if sum, ok := c.lookupEntry(e); ok {
			e.setDigest(sum)
			found++
		}
	}
	return found
}
