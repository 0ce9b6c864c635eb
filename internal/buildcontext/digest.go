package buildcontext

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"
)

// HashOptions tunes the computation of file digests.
type HashOptions struct {
	// Cache, when set, supplies digests of files whose stat identity is unchanged and
	// receives new ones; call Cache.Save to persist them.
	Cache *StatCache
	// Workers is the number of files hashed at once; 0 means GOMAXPROCS.
	Workers int
}

const (
	// readBufferSize is the read size per worker: memory stays at Workers × this,
	// whatever the file sizes.
	readBufferSize = 256 << 10
	// settleTime: a digest is not cached when the file's mtime is this close to the moment
	// it was read, since the file may still be changing within the mtime granularity.
	settleTime = 2 * time.Second
)

var bufferPool = sync.Pool{New: func() any { b := make([]byte, readBufferSize); return &b }}

// DigestStats says where the digests of one hash came from.
type DigestStats struct {
	Cached    int   // files whose digest came from the cache
	Read      int   // files read and hashed
	BytesRead int64 // bytes read from those files
}

// digester hashes files on opts.Workers goroutines, the one pool of the tests' listing and
// StreamPortableHash. The first failure cancels the rest and is what wait returns.
type digester struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	jobs   chan digestJob
	wg     sync.WaitGroup
}

type digestJob struct {
	e    *Entry
	path string
	done chan struct{} // closed once e has its digest or the digester failed; may be nil
}

// startDigester starts at most files workers (all of opts.Workers when files is 0:
// unknown) with room for queue jobs waiting.
func startDigester(ctx context.Context, opts HashOptions, files, queue int) *digester {
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if files > 0 {
		workers = min(workers, files)
	}
	d := &digester{jobs: make(chan digestJob, queue)}
	d.ctx, d.cancel = context.WithCancelCause(ctx)
	for range workers {
		d.wg.Go(func() {
			for j := range d.jobs {
				if d.ctx.Err() == nil {
					if sum, err := hashFile(d.ctx, j.path, j.e, opts.Cache); err != nil {
						d.cancel(err)
					} else {
						j.e.setDigest(sum)
					}
				}
				if j.done != nil {
					close(j.done)
				}
			}
		})
	}
	return d
}

// submit queues e (read from path); false once the digester has failed or ctx ended.
func (d *digester) submit(e *Entry, path string, done chan struct{}) bool {
	select {
	case d.jobs <- digestJob{e, path, done}:
		return true
	case <-d.ctx.Done():
		return false
	}
}

// wait ends the workers once the queued files are hashed and returns the first failure.
func (d *digester) wait() error {
	close(d.jobs)
	d.wg.Wait()
	err := context.Cause(d.ctx)
	d.cancel(nil)
	return err
}

// hashFile digests one file, checking it is still the file that was listed. It reads
// exactly the listed size and then compares the open file's identity with the listing's:
// a different inode, size, mtime or ctime means the file was replaced or changed since
// listing or while being read (a shorter file ends the read early).
func hashFile(ctx context.Context, path string, e *Entry, cache *StatCache) ([32]byte, error) {
	var sum [32]byte
	f, err := openContent(path)
	if err != nil {
		return sum, fmt.Errorf("reading %s: %w", e.Path, err)
	}
	defer f.Close()
	readAt := time.Now()
	h := sha256.New()
	n, err := copyWithContext(ctx, h, io.LimitReader(f, e.Size))
	if err != nil {
		return sum, fmt.Errorf("reading %s: %w", e.Path, err)
	}
	after, err := f.identity()
	if err != nil {
		return sum, fmt.Errorf("reading %s: %w", e.Path, err)
	}
	if after != e.ID || n != e.Size {
		return sum, changedError(e.Path, "since it was listed")
	}
	h.Sum(sum[:0])
	cacheDigest(cache, e, readAt, sum)
	return sum, nil
}

// cacheDigest stores the digest of the file e read at readAt, unless it was modified
// within settleTime of that moment.
func cacheDigest(cache *StatCache, e *Entry, readAt time.Time, sum [32]byte) {
	if cache != nil && readAt.Sub(time.Unix(0, e.ID.MtimeNs)) >= settleTime {
		cache.store(e.ID, e.cacheMiss, sum)
	}
}

func changedError(path, when string) error {
	return &contextError{fmt.Sprintf("build context changed: %s was modified %s", path, when), ErrChanged}
}

// copyWithContext copies src to dst through a pooled buffer, stopping when ctx ends.
func copyWithContext(ctx context.Context, dst io.Writer, src io.Reader) (int64, error) {
	bp := bufferPool.Get().(*[]byte) //nolint:forcetypeassert // bufferPool holds only the *[]byte its New makes and this function puts back
	defer bufferPool.Put(bp)
	buf := *bp
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, context.Cause(ctx)
		}
		r, err := src.Read(buf)
		if r > 0 {
			if _, werr := dst.Write(buf[:r]); werr != nil {
				return n, werr
			}
			n += int64(r)
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
