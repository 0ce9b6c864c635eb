package buildcontext

import (
	"context"
	"encoding/hex"
	"errors"
	"path/filepath"
	"slices"
	"sync/atomic"
)

// StreamSummary is what StreamPortableHash or StreamSDKHash found.
type StreamSummary struct {
	Hash string
	// Fingerprint (hex), set by StreamSDKHash, digests what the SDK-compatible hash covers
	// with each file named by its digest: the key the hash is cached under, which an
	// archive of the same files finds (ArchiveCheck.SDKHash).
	Fingerprint string
	Entries     int
	// Stats says where the file digests came from. In the e2b-sdk mode either every one
	// came from the cache, and the hash too (warm), or every file was read.
	Stats DigestStats
	// Newest are the most recently modified files (absolute paths, newest first, at most
	// NewestKept): the likely culprits when the hash is not the one planned.
	Newest []string
}

// NewestKept is how many files StreamSummary.Newest names.
const NewestKept = 3

// hashWindow is how many entries a streamed hash holds at most between the walk and the
// hash: the files being read and those listed after them. It keeps both cores busy
// reading small files and bounds memory whatever the size of the tree.
const hashWindow = 4096

// StreamPortableHash is the portable files hash of the step (src, dest) (design/hashing.md
// "Portable files hash") over what Walk lists, without holding the listing: the walk feeds the files it lists
// to the digest workers and the hash takes the entries in order as their digests come, at
// most hashWindow of them waiting. Each entry is checked as CheckArchive checks an
// archive's entries. A file that changes while it is hashed is an error naming it.
func StreamPortableHash(ctx context.Context, contextDir, src, dest string, lo ListOptions, ho HashOptions) (StreamSummary, error) {
	root, err := contextRoot(contextDir)
	if err != nil {
		return StreamSummary{}, err
	}
	type slot struct {
		e    Entry
		done chan struct{} // closed when e has its digest; nil if it needs none
	}
	order := make(chan *slot, hashWindow)
	var waiting atomic.Int64 // slots sent to the hasher and not hashed yet
	d := startDigester(ctx, ho, 0, hashWindow)
	h := newPortableHasher(src, dest)
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		for s := range order {
			if s.done != nil {
				<-s.done
			}
			h.add(&s.e)
			waiting.Add(-1)
		}
	}()
	var sum StreamSummary
	err = walkStep(root, src, lo, &sum, func(e *Entry) error {
		if e.Kind != KindFile || fromCache(ho.Cache, e, &sum.Stats) {
			if waiting.Load() == 0 {
				// Nothing is waiting for a digest: hash the entry here, in order, without
				// a hand-off to the hasher (a warm run hashes every entry this way).
				h.add(e)
				return nil
			}
			waiting.Add(1)
			order <- &slot{e: *e}
			return nil
		}
		s := &slot{e: *e, done: make(chan struct{})}
		sum.Stats.Read++
		sum.Stats.BytesRead += e.Size
		if !d.submit(&s.e, sourcePath(root, &s.e), s.done) {
			close(s.done)
			return context.Cause(d.ctx)
		}
		waiting.Add(1)
		order <- s
		return nil
	})
	close(order)
	failed := d.wait()
	<-hashed
	if err == nil {
		err = failed
	}
	if err != nil {
		return StreamSummary{}, err
	}
	sum.Hash = h.sum()
	return sum, nil
}

// StreamSDKHash is the SDK-compatible hash of the step (src, dest) over what Walk lists
// (sdkHasher, design/hashing.md "E2B SDK-compatible files hash"), without holding the listing, and the fingerprint of
// what it covers. Each entry is checked as CheckArchive checks an archive's entries. With
// ho.Cache, a first walk makes the fingerprint from cached digests alone: when the cache holds
// every file's digest and the step hash under that fingerprint, that is the hash and no
// file is read. Otherwise a walk reads every file in the SDK's order, one at a time, at
// most hashWindow entries between the walk and the hash, and caches the step hash. A file
// that changes while it is hashed is an error naming it. ho.Workers is not used.
func StreamSDKHash(ctx context.Context, contextDir, src, dest string, lo ListOptions, ho HashOptions) (StreamSummary, error) {
	root, err := contextRoot(contextDir)
	if err != nil {
		return StreamSummary{}, err
	}
	if ho.Cache != nil {
		if sum, ok, err := cachedSDKHash(ctx, root, src, dest, lo, ho.Cache); ok || err != nil {
			return sum, err
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	entries := make(chan Entry, hashWindow)
	h := newSDKHasher(src, dest)
	defer h.close()
	fp := newSDKFingerprinter(src, dest)
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		for e := range entries {
			if ctx.Err() != nil {
				continue // drain: the walk stops at its next entry
			}
			if err := h.add(ctx, root, &e, ho.Cache); err != nil {
				cancel(err)
				continue
			}
			fp.add(&e)
		}
	}()
	var sum StreamSummary
	order := sdkOrder{next: func(e *Entry) error {
		select {
		case entries <- *e:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}}
	err = walkStep(root, src, lo, &sum, func(e *Entry) error {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if e.Kind == KindFile {
			sum.Stats.Read++
			sum.Stats.BytesRead += e.Size
		}
		return order.add(e)
	})
	if err == nil {
		err = order.end()
	}
	if err != nil {
		cancel(err) // the hash stops at its next entry
	}
	close(entries)
	<-hashed
	if err == nil {
		err = context.Cause(ctx)
	}
	if err != nil {
		return StreamSummary{}, err
	}
	hash, fingerprint := h.sum(), fp.sum()
	if ho.Cache != nil {
		ho.Cache.storeStepHash(fingerprint, hash)
	}
	sum.Hash, sum.Fingerprint = hex.EncodeToString(hash[:]), hex.EncodeToString(fingerprint[:])
	return sum, nil
}

// errNotCached stops the walk of cachedSDKHash at the first file whose digest the cache
// lacks.
var errNotCached = errors.New("a file's digest is not cached")

// cachedSDKHash is StreamSDKHash from the cache alone: the fingerprint of the step from
// cached digests, then the step hash cached under it. It reports false, having read no
// file, when the cache lacks either.
func cachedSDKHash(ctx context.Context, root, src, dest string, lo ListOptions, cache *StatCache) (StreamSummary, bool, error) {
	var sum StreamSummary
	fp := newSDKWalkFingerprint(src, dest)
	err := walkStep(root, src, lo, &sum, func(e *Entry) error {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if e.Kind == KindFile && !fromCache(cache, e, &sum.Stats) {
			return errNotCached
		}
		fp.add(e)
		return nil
	})
	switch {
	case errors.Is(err, errNotCached):
		return StreamSummary{}, false, nil
	case err != nil:
		return StreamSummary{}, false, err
	}
	fingerprint := fp.fingerprint()
	hash, ok := cache.stepHash(fingerprint)
	if !ok {
		return StreamSummary{}, false, nil
	}
	sum.Hash, sum.Fingerprint = hex.EncodeToString(hash[:]), hex.EncodeToString(fingerprint[:])
	return sum, true, nil
}

// walkStep walks the entries of the COPY source src as Walk does and passes each to fn,
// after what every streamed walk of a step does: check it as CheckArchive checks an
// archive's entries, count it and keep the files modified last, in sum.
func walkStep(root, src string, lo ListOptions, sum *StreamSummary, fn func(*Entry) error) error {
	check := entryChecker{}
	newest := newestFiles{n: NewestKept}
	_, err := Walk(root, src, lo, func(e *Entry) error {
		if err := check.check(e); err != nil {
			return err
		}
		sum.Entries++
		newest.add(e)
		return fn(e)
	})
	sum.Newest = newest.paths(root)
	return err
}

// fromCache sets the digest of the file e from the cache, counting it in stats; false
// when the cache (which may be nil) lacks it.
func fromCache(cache *StatCache, e *Entry, stats *DigestStats) bool {
	digest, ok := cache.digest(e)
	if ok {
		e.setDigest(digest)
		stats.Cached++
	}
	return ok
}

// newestFiles keeps the n most recently modified files it is shown. It keeps their
// listed paths, which need no allocation (in a tree written in walk order every file is
// the newest so far), and joins them to the root at the end.
type newestFiles struct {
	n      int
	rels   []string // newest first
	mtimes []int64
}

func (f *newestFiles) add(e *Entry) {
	if e.Kind != KindFile {
		return
	}
	i := len(f.mtimes)
	for i > 0 && f.mtimes[i-1] < e.ID.MtimeNs {
		i--
	}
	if i >= f.n {
		return
	}
	f.rels = slices.Insert(f.rels, i, e.Path)
	f.mtimes = slices.Insert(f.mtimes, i, e.ID.MtimeNs)
	f.rels, f.mtimes = f.rels[:min(len(f.rels), f.n)], f.mtimes[:min(len(f.mtimes), f.n)]
}

// paths are the absolute paths of the files kept, listed in root.
func (f *newestFiles) paths(root string) []string {
	var paths []string
	for _, rel := range f.rels {
		paths = append(paths, filepath.Join(root, filepath.FromSlash(rel)))
	}
	return paths
}
