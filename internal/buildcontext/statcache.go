package buildcontext

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
)

// StatCache is the persistent digest cache: file digests keyed by stat identity, so a
// second hash of an unchanged tree reads metadata only. It is safe for concurrent use by
// goroutines; several processes may share one file (each Save merges what is on disk and
// replaces the file atomically; a lost race only loses cache entries, never correctness).
//
// It also keeps step hashes that cannot be made of file digests (the SDK-compatible hash,
// see StreamSDKHash), under a fingerprint of the step's inputs.
//
// The file keeps the digests in the order the process that saved it asked for them, so
// the next hash of an unchanged tree finds each one right after the last: it reads the
// file front to back instead of at random, a few times faster than any index.
//
// What a process computes is for the processes after it: lookups answer from the file as
// it was opened (or last saved), so a file that two COPY steps of one cold plan share is
// read by both. Keeping the new digests findable would take an index of 8 bytes each,
// an eighth of the memory a plan of a million files may use.
type StatCache struct {
	path string

	mu         sync.Mutex
	loaded     digestTable // the digests of the file
	loadedFile os.FileInfo // the file they were read from, nil if none
	// saved says Save wrote the file and loaded is yet to be read from it, of which the
	// first savedAsked records in the order this process asked for them: read on next use,
	// as a plan saves once at its end, so a save never holds the old and new tables.
	saved      bool
	savedAsked int
	// added holds the digests this process computed and, not yet stored, those it asked
	// for and the cache lacked (one record for both: a cold run asks for every file).
	added    newDigests
	asked    uint32 // how many digests this process asked for
	capacity int    // how many digests Save keeps: maxCacheEntries
}

const (
	cacheMagic = "E2BDIG01"
	// cacheKeySize is a record's key: dev, ino, size, mtime, ctime (8 bytes each), mode (4).
	cacheKeySize = 5*8 + 4
	// cacheRecordSize is the key and the sha256.
	cacheRecordSize = cacheKeySize + 32
	// maxCacheEntries bounds the file (about 80 MB): a tree of a million files stays warm.
	maxCacheEntries = 1 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// DefaultStatCachePath is <user cache dir>/terraform-provider-e2b/digests-v1.bin; the user
// cache dir honours XDG_CACHE_HOME on Linux.
func DefaultStatCachePath() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("locating the user cache directory for the digest cache: %w", err)
	}
	return filepath.Join(dir, "terraform-provider-e2b", "digests-v1.bin"), nil
}

// OpenStatCache opens the cache file at path. A missing, unreadable or corrupt file gives
// an empty cache: the files are simply hashed again. The file is checked on its own
// goroutine, which holds mu until done, so it overlaps the listing that usually follows;
// every method waits for it by taking mu.
func OpenStatCache(path string) *StatCache {
	c := &StatCache{path: path, added: newDigests{dir: filepath.Dir(path)}, capacity: maxCacheEntries}
	c.mu.Lock()
	go func() {
		defer c.mu.Unlock()
		c.open(0)
	}()
	return c
}

// open reads the cache file, of which the first asked records were asked for in order.
// c.mu must be held.
func (c *StatCache) open(asked int) {
	if file, fi, err := openCacheFile(c.path); err == nil {
		c.loaded, c.loadedFile = newDigestTable(file, asked), fi
	}
}

// Path is where the cache is stored.
func (c *StatCache) Path() string { return c.path }

// Len is the number of cached digests.
func (c *StatCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readSaved()
	return c.loaded.len() + c.added.stored
}

// readSaved reads back the file Save wrote (see saved). c.mu must be held.
func (c *StatCache) readSaved() {
	if c.saved {
		c.saved = false
		c.open(c.savedAsked)
	}
}

// digest is the digest cached for the file e (see lookupEntry), none without a cache.
func (c *StatCache) digest(e *Entry) ([32]byte, bool) {
	if c == nil {
		return [32]byte{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookupEntry(e)
}

// lookupEntry is lookup for the file e, which carries a miss to the store of its digest.
// c.mu must be held.
func (c *StatCache) lookupEntry(e *Entry) ([32]byte, bool) {
	sum, ok, miss := c.lookup(e.ID)
	e.cacheMiss = miss
	return sum, ok
}

// lookup is the digest cached under id, noting that it was asked for. A miss is recorded
// where the digest will go, so the saved file keeps the order asked; its number + 1 is
// returned for store. c.mu must be held.
func (c *StatCache) lookup(id FileID) ([32]byte, bool, uint32) {
	c.asked++
	var key [cacheKeySize]byte
	putCacheKey(key[:], id)
	c.readSaved()
	if sum, ok := c.loaded.lookup(key[:], c.asked); ok {
		return sum, true, 0
	}
	return [32]byte{}, false, c.added.add(key[:], c.asked, nil)
}

// store adds the digest of a file the cache lacked: in the record of its miss (as
// lookup returned it), or, for a file read without asking the cache (miss 0), in a new one.
func (c *StatCache) store(id FileID, miss uint32, sum [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var key [cacheKeySize]byte
	putCacheKey(key[:], id)
	if miss > 0 {
		if r := c.added.record(int(miss - 1)); r != nil && !storedRecord(r) && bytes.Equal(r[:cacheKeySize], key[:]) {
			c.added.setSum(int(miss-1), sum)
		}
		return
	}
	c.readSaved()
	if i := c.loaded.locate(key[:]); i >= 0 {
		if r := c.loaded.record(i); r != nil && [32]byte(r[cacheKeySize:]) == sum {
			return // read again by a caller that did not ask the cache first
		}
	}
	c.added.add(key[:], 0, &sum)
}

// stepKey is the record key of a step hash: the fingerprint of the step's inputs in the
// fields of a FileID, with mode 0, which no listed file has (its st_mode has a type bit),
// so a step record never answers for a file nor a file record for a step.
func stepKey(fingerprint [32]byte) FileID {
	le := binary.LittleEndian
	return FileID{
		Ino:     le.Uint64(fingerprint[0:]),
		Size:    int64(le.Uint64(fingerprint[8:])),  //nolint:gosec // bits of a digest, read back the same way
		MtimeNs: int64(le.Uint64(fingerprint[16:])), //nolint:gosec // as Size
		CtimeNs: int64(le.Uint64(fingerprint[24:])), //nolint:gosec // as Size
	}
}

// stepHash is the step hash cached under fingerprint (see storeStepHash); the cache may
// be nil.
func (c *StatCache) stepHash(fingerprint [32]byte) ([32]byte, bool) {
	if c == nil {
		return [32]byte{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sum, ok, _ := c.lookup(stepKey(fingerprint))
	return sum, ok
}

// storeStepHash caches the hash of a step whose inputs have the given fingerprint. The
// fingerprint covers the file contents (by digest), so unlike a file digest it is valid
// however recently the files changed.
func (c *StatCache) storeStepHash(fingerprint, sum [32]byte) {
	c.store(stepKey(fingerprint), 0, sum)
}

// Save writes new digests to the cache file: it merges the entries another process may
// have saved since this one read the file, keeps at most maxCacheEntries (those used by
// this process first, in the order it asked for them) and replaces the file by renaming
// a fully written temporary file over it. It streams the records from the files they are
// in; what it holds is 4 bytes per digest asked for, to put them in order.
func (c *StatCache) Save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.added.stored == 0 {
		return nil
	}
	c.readSaved()
	var onDisk digestTable // another process's save since this one's read
	if fi, err := os.Stat(c.path); err == nil && !os.SameFile(fi, c.loadedFile) {
		if file, _, err := openCacheFile(c.path); err == nil {
			onDisk = newDigestTable(file, 0)
			defer onDisk.close()
		}
	}
	// Where the asked-th digest is: loaded record i as i+1, added record j as -(j+1), none
	// as 0.
	asked := make([]int32, c.asked)
	for i, at := range c.loaded.askedAt {
		if at != 0 {
			asked[at-1] = int32(i + 1)
		}
	}
	for j := range c.added.n {
		if r := c.added.record(j); storedRecord(r) && askedOf(r) != 0 {
			asked[askedOf(r)-1] = -int32(j + 1)
		}
	}
	// A digest computed twice (a file of two COPY steps, a hard link) is saved once.
	seen := sized(c.added.stored)
	first := func(j int) bool {
		// A copy: the lookup reads other records, which may reuse the block j was read into.
		var key [cacheKeySize]byte
		if k := c.added.key(j); k != nil {
			copy(key[:], k)
		} else {
			return false
		}
		if seen.find(key[:], c.added.key) >= 0 {
			return false
		}
		seen.put(key[:], j)
		return true
	}
	// The step hashes computed without asking (a cold e2b-sdk hash stores its step that
	// way) keep their room, for they stand for a whole step: a tree of capacity files
	// would otherwise push them out.
	steps := 0
	for j := range c.added.n {
		if r := c.added.record(j); storedRecord(r) && askedOf(r) == 0 && isStepRecord(r) {
			steps++
		}
	}
	written := 0 // records in the order asked for, which the next hash asks for again
	err := writeCacheFile(c.path, func(w *cacheWriter) {
		w.limit = c.capacity - min(steps, c.capacity)
		for _, at := range asked {
			switch {
			case at > 0:
				w.add(c.loaded.record(int(at - 1)))
			case at < 0 && first(int(-at-1)):
				w.add(c.added.record(int(-at - 1)))
			}
		}
		written, w.limit = w.n, c.capacity
		// Then what was computed without asking: step hashes first, then file digests.
		for _, steps := range []bool{true, false} {
			for j := range c.added.n {
				if r := c.added.record(j); storedRecord(r) && askedOf(r) == 0 && isStepRecord(r) == steps && first(j) {
					w.add(c.added.record(j))
				}
			}
		}
		for i, at := range c.loaded.askedAt {
			if at == 0 {
				w.add(c.loaded.record(i))
			}
		}
		for i := range onDisk.len() {
			key := append([]byte(nil), onDisk.key(i)...)
			if key != nil && c.loaded.find(key) < 0 && seen.find(key, c.added.key) < 0 {
				w.add(onDisk.record(i))
			}
		}
	})
	if err != nil {
		return err
	}
	c.added.release()
	c.loaded.close()
	c.loaded, c.loadedFile = digestTable{}, nil
	c.saved, c.savedAsked = true, written
	return nil
}

// cacheWriter writes the records of a cache file, at most limit, and their checksum.
type cacheWriter struct {
	w     *bufio.Writer
	crc   hash.Hash32
	n     int
	limit int // maxCacheEntries unless Save says otherwise
}

func (w *cacheWriter) write(p []byte) {
	_, _ = w.w.Write(p) // a bufio.Writer keeps its first error for Flush
	w.crc.Write(p)
}

// add writes the cache record at the start of record (a loaded or a new one); a record
// that could not be read (nil) is left out.
func (w *cacheWriter) add(record []byte) {
	if record != nil && w.n < w.limit {
		w.write(record[:cacheRecordSize])
		w.n++
	}
}

// isStepRecord reports whether a record holds a step hash (stepKey's mode 0).
func isStepRecord(r []byte) bool { return binary.LittleEndian.Uint32(r[40:]) == 0 }

func putCacheKey(k []byte, id FileID) {
	le := binary.LittleEndian
	le.PutUint64(k[0:], id.Dev)
	le.PutUint64(k[8:], id.Ino)
	le.PutUint64(k[16:], uint64(id.Size))    //nolint:gosec // read back as an int64
	le.PutUint64(k[24:], uint64(id.MtimeNs)) //nolint:gosec // as Size
	le.PutUint64(k[32:], uint64(id.CtimeNs)) //nolint:gosec // as Size
	le.PutUint32(k[40:], id.Mode)
}
