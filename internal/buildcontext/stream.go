package buildcontext

import (
	"context"
	"path/filepath"
	"slices"
)

// StreamSummary is what StreamPortableHash found.
type StreamSummary struct {
	Hash    string
	Entries int
	Stats   DigestStats
	// Newest are the most recently modified files (absolute paths, newest first, at most
	// NewestKept): the likely culprits when the hash is not the one planned.
	Newest []string
}

// NewestKept is how many files StreamSummary.Newest names.
const NewestKept = 3

// hashWindow is how many entries StreamPortableHash holds at most between the walk and
// the hash: the files being read and those listed after them. It keeps both cores busy
// reading small files and bounds memory whatever the size of the tree.
const hashWindow = 4096

// StreamPortableHash is List followed by PortableHash, without holding the listing: the
// walk (Walk) feeds the files it lists to the digest workers and the hash takes the
// entries in order as their digests come, at most hashWindow of them waiting. Each entry
// is checked as CheckEntries checks a listing. A file that changes while it is hashed is
// an error naming it, as in ComputeDigests.
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
	d := startDigester(ctx, ho, 0, hashWindow)
	h := newPortableHasher(src, dest)
	newest := newestFiles{n: NewestKept}
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		for s := range order {
			if s.done != nil {
				<-s.done
			}
			h.add(&s.e)
			newest.add(root, &s.e)
		}
	}()
	var sum StreamSummary
	check := entryChecker{}
	_, err = Walk(root, src, lo, func(e *Entry) error {
		if err := check.check(e); err != nil {
			return err
		}
		sum.Entries++
		s := &slot{e: *e}
		if e.Kind == KindFile {
			if digest, ok := ho.Cache.digest(&s.e); ok {
				s.e.setDigest(digest)
				sum.Stats.Cached++
			} else {
				s.done = make(chan struct{})
				sum.Stats.Read++
				sum.Stats.BytesRead += e.Size
				if !d.submit(&s.e, sourcePath(root, &s.e), s.done) {
					close(s.done)
					return context.Cause(d.ctx)
				}
			}
		}
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
	sum.Hash, sum.Newest = h.sum(), newest.paths
	return sum, nil
}

// newestFiles keeps the paths of the n most recently modified files it is shown.
type newestFiles struct {
	n      int
	paths  []string // newest first
	mtimes []int64
}

func (f *newestFiles) add(root string, e *Entry) {
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
	f.paths = slices.Insert(f.paths, i, filepath.Join(root, filepath.FromSlash(e.Path)))
	f.mtimes = slices.Insert(f.mtimes, i, e.ID.MtimeNs)
	f.paths, f.mtimes = f.paths[:min(len(f.paths), f.n)], f.mtimes[:min(len(f.mtimes), f.n)]
}

// Newest is the absolute paths of the n most recently modified files, newest first.
func (l *Listing) Newest(n int) []string {
	newest := newestFiles{n: n}
	for i := range l.Entries {
		newest.add(l.Context, &l.Entries[i])
	}
	return newest.paths
}
