package buildcontext

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/maphash"
	"io"
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
// see SDKHash), under a fingerprint of the step's inputs.
//
// The file keeps the digests in the order the process that saved it asked for them, so
// the next hash of an unchanged tree finds each one right after the last: it reads the
// file front to back instead of at random, a few times faster than any index.
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
	// for and the cache lacked (one map for both: a cold run asks for every file).
	added  map[FileID]cachedDigest
	stored int    // how many of added are stored
	asked  uint32 // how many digests this process asked for
}

type cachedDigest struct {
	sum [32]byte
	// askedAt orders the digests this process asked for, from 1; 0 if it did not ask.
	// Those it asked for are saved first, in this order, and kept when the file is trimmed.
	askedAt uint32
	stored  bool // sum is set; otherwise this is only when it was asked for
}

const (
	cacheMagic = "E2BDIG01"
	// cacheKeySize is a record's key: dev, ino, size, mtime, ctime (8 bytes each), mode (4).
	cacheKeySize = 5*8 + 4
	// cacheRecordSize is the key and the sha256.
	cacheRecordSize = cacheKeySize + 32
	// maxCacheEntries bounds the file (about 80 MB) and the memory it takes: a tree of a
	// million files stays warm.
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

// OpenStatCache loads the cache file at path. A missing, unreadable or corrupt file gives
// an empty cache: the files are simply hashed again. The file is read on its own
// goroutine, which holds mu until done, so it overlaps the listing that usually follows;
// every method waits for it by taking mu.
func OpenStatCache(path string) *StatCache {
	c := &StatCache{path: path}
	c.mu.Lock()
	go func() {
		defer c.mu.Unlock()
		if records, fi, err := readCacheRecords(path); err == nil {
			c.loaded, c.loadedFile = newDigestTable(records, 0), fi
		}
	}()
	return c
}

// Path is where the cache is stored.
func (c *StatCache) Path() string { return c.path }

// Len is the number of cached digests.
func (c *StatCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readSaved()
	return c.loaded.len() + c.stored
}

// readSaved reads back the file Save wrote (see saved). c.mu must be held.
func (c *StatCache) readSaved() {
	if !c.saved {
		return
	}
	c.saved = false
	if records, fi, err := readCacheRecords(c.path); err == nil {
		c.loaded, c.loadedFile = newDigestTable(records, c.savedAsked), fi
	}
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
		if sum, ok := c.lookup(e.ID); ok {
			e.setDigest(sum)
			found++
		}
	}
	return found
}

// lookup is the digest cached under id, noting that it was asked for (and when, for a
// miss, so store keeps the order). c.mu must be held.
func (c *StatCache) lookup(id FileID) ([32]byte, bool) {
	c.asked++
	if d, ok := c.added[id]; ok {
		return d.sum, d.stored
	}
	c.readSaved()
	if sum, ok := c.loaded.lookup(id, c.asked); ok {
		return sum, true
	}
	if c.added == nil {
		c.added = map[FileID]cachedDigest{}
	}
	c.added[id] = cachedDigest{askedAt: c.asked}
	return [32]byte{}, false
}

// store adds the digest of a file fill did not find.
func (c *StatCache) store(id FileID, sum [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.added == nil {
		c.added = map[FileID]cachedDigest{}
	}
	d := c.added[id]
	if !d.stored {
		c.stored++
	}
	c.added[id] = cachedDigest{sum: sum, askedAt: d.askedAt, stored: true}
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

// stepHash is the step hash cached under fingerprint (see storeStepHash).
func (c *StatCache) stepHash(fingerprint [32]byte) ([32]byte, bool) {
	return c.digest(stepKey(fingerprint))
}

// digest is the digest cached under id (as lookup), none without a cache.
func (c *StatCache) digest(id FileID) ([32]byte, bool) {
	if c == nil {
		return [32]byte{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookup(id)
}

// storeStepHash caches the hash of a step whose inputs have the given fingerprint. The
// fingerprint covers the file contents (by digest), so unlike a file digest it is valid
// however recently the files changed.
func (c *StatCache) storeStepHash(fingerprint, sum [32]byte) { c.store(stepKey(fingerprint), sum) }

// Save writes new digests to the cache file: it merges the entries another process may
// have saved since this one read the file, keeps at most maxCacheEntries (those used by
// this process first, in the order it asked for them) and replaces the file by renaming
// a fully written temporary file over it. It builds the file's bytes and nothing else:
// a record for each digest kept, no map of them.
func (c *StatCache) Save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stored == 0 {
		return nil
	}
	c.readSaved()
	var onDisk digestTable // another process's save since this one's read
	if fi, err := os.Stat(c.path); err == nil && !os.SameFile(fi, c.loadedFile) {
		if records, _, err := readCacheRecords(c.path); err == nil {
			onDisk = newDigestTable(records, 0)
		}
	}
	// Where the asked-th digest is: loaded record i as i+1, added[j] as -(j+1), none as 0.
	asked := make([]int32, c.asked)
	for i, at := range c.loaded.askedAt {
		if at != 0 {
			asked[at-1] = int32(i + 1)
		}
	}
	added := make([]FileID, 0, c.stored)
	for id, d := range c.added {
		if d.stored {
			added = append(added, id)
		}
	}
	var unasked []FileID // added without being asked for first
	for j, id := range added {
		if at := c.added[id].askedAt; at != 0 {
			asked[at-1] = -int32(j + 1)
		} else {
			unasked = append(unasked, id)
		}
	}
	written := 0 // records in the order asked for, which the next hash asks for again
	err := writeCacheFile(c.path, func(w *cacheWriter) {
		for _, at := range asked {
			switch {
			case at > 0:
				w.add(c.loaded.record(int(at - 1)))
			case at < 0:
				id := added[-at-1]
				w.addDigest(id, c.added[id].sum)
			}
		}
		written = w.n
		for _, id := range unasked {
			w.addDigest(id, c.added[id].sum)
		}
		for i, at := range c.loaded.askedAt {
			if at == 0 {
				w.add(c.loaded.record(i))
			}
		}
		for i := range onDisk.len() {
			if id := onDisk.id(i); !c.loaded.has(onDisk.key(i)) && !c.hasAdded(id) {
				w.add(onDisk.record(i))
			}
		}
	})
	if err != nil {
		return err
	}
	c.added, c.stored, c.loaded, c.loadedFile = nil, 0, digestTable{}, nil
	c.saved, c.savedAsked = true, min(written, maxCacheEntries)
	return nil
}

func (c *StatCache) hasAdded(id FileID) bool {
	d, ok := c.added[id]
	return ok && d.stored
}

// cacheWriter writes the records of a cache file, at most maxCacheEntries, and their
// checksum.
type cacheWriter struct {
	w   *bufio.Writer
	crc hash.Hash32
	n   int
}

func (w *cacheWriter) write(p []byte) {
	_, _ = w.w.Write(p) // a bufio.Writer keeps its first error for Flush
	w.crc.Write(p)
}

func (w *cacheWriter) add(record []byte) {
	if w.n < maxCacheEntries {
		w.write(record)
		w.n++
	}
}

func (w *cacheWriter) addDigest(id FileID, sum [32]byte) {
	var rec [cacheRecordSize]byte
	putCacheKey(rec[:], id)
	copy(rec[cacheKeySize:], sum[:])
	w.add(rec[:])
}

// digestTable is the records of a cache file as read. A lookup tries the record after
// the one it found last, then an open-addressing index built on first need: a few
// allocations without pointers, nothing for the garbage collector to scan.
type digestTable struct {
	records []byte   // cacheRecordSize bytes each
	askedAt []uint32 // per record, as cachedDigest.askedAt
	next    int      // the record after the one found last
	slots   []uint32 // record number + 1 at its key's hash, or after it; 0 is empty
	seed    maphash.Seed
}

// newDigestTable holds records, of which the first asked were asked for in that order.
func newDigestTable(records []byte, asked int) digestTable {
	t := digestTable{records: records, askedAt: make([]uint32, len(records)/cacheRecordSize)}
	for i := range asked {
		t.askedAt[i] = uint32(i + 1)
	}
	return t
}

func (t *digestTable) len() int { return len(t.askedAt) }

func (t *digestTable) key(i int) []byte {
	return t.records[i*cacheRecordSize : i*cacheRecordSize+cacheKeySize]
}

func (t *digestTable) record(i int) []byte {
	return t.records[i*cacheRecordSize : (i+1)*cacheRecordSize]
}

// has reports whether a record holds key.
func (t *digestTable) has(key []byte) bool { return t.len() > 0 && t.find(key) >= 0 }

func (t *digestTable) sum(i int) [32]byte {
	return [32]byte(t.records[i*cacheRecordSize+cacheKeySize : (i+1)*cacheRecordSize])
}

func (t *digestTable) id(i int) FileID {
	k := t.key(i)
	le := binary.LittleEndian
	return FileID{
		Dev:     le.Uint64(k[0:]),
		Ino:     le.Uint64(k[8:]),
		Size:    int64(le.Uint64(k[16:])), //nolint:gosec // written from an int64
		MtimeNs: int64(le.Uint64(k[24:])), //nolint:gosec // as Size
		CtimeNs: int64(le.Uint64(k[32:])), //nolint:gosec // as Size
		Mode:    le.Uint32(k[40:]),
	}
}

// lookup finds id's digest, noting that it was asked for as the asked-th.
func (t *digestTable) lookup(id FileID, asked uint32) ([32]byte, bool) {
	if t.len() == 0 {
		return [32]byte{}, false
	}
	var key [cacheKeySize]byte
	putCacheKey(key[:], id)
	i := t.next
	if i >= t.len() || !bytes.Equal(t.key(i), key[:]) {
		if i = t.find(key[:]); i < 0 {
			return [32]byte{}, false
		}
	}
	t.next = i + 1
	if t.askedAt[i] == 0 {
		t.askedAt[i] = asked
	}
	return t.sum(i), true
}

// find is the record holding key, or -1.
func (t *digestTable) find(key []byte) int {
	if t.slots == nil {
		t.index()
	}
	for slot := t.slotOf(key); t.slots[slot] != 0; slot = (slot + 1) & (len(t.slots) - 1) {
		if i := int(t.slots[slot] - 1); bytes.Equal(t.key(i), key) {
			return i
		}
	}
	return -1
}

func (t *digestTable) index() {
	size := 16
	for size < 2*t.len() {
		size *= 2
	}
	t.slots, t.seed = make([]uint32, size), maphash.MakeSeed()
	for i := range t.len() {
		slot := t.slotOf(t.key(i))
		for t.slots[slot] != 0 {
			slot = (slot + 1) & (len(t.slots) - 1)
		}
		t.slots[slot] = uint32(i + 1)
	}
}

func (t *digestTable) slotOf(key []byte) int {
	return int(maphash.Bytes(t.seed, key) & uint64(len(t.slots)-1)) //nolint:gosec // masked to the table size
}

func putCacheKey(k []byte, id FileID) {
	le := binary.LittleEndian
	le.PutUint64(k[0:], id.Dev)
	le.PutUint64(k[8:], id.Ino)
	le.PutUint64(k[16:], uint64(id.Size))    //nolint:gosec // read back as an int64
	le.PutUint64(k[24:], uint64(id.MtimeNs)) //nolint:gosec // as Size
	le.PutUint64(k[32:], uint64(id.CtimeNs)) //nolint:gosec // as Size
	le.PutUint32(k[40:], id.Mode)
}

// readCacheRecords reads the cache file at path and returns its records and the file's
// stat.
func readCacheRecords(path string) ([]byte, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, nil, fmt.Errorf("reading digest cache %s: %w", path, err)
	}
	body := len(data) - 4
	if body < len(cacheMagic) || string(data[:len(cacheMagic)]) != cacheMagic ||
		(body-len(cacheMagic))%cacheRecordSize != 0 ||
		crc32.Checksum(data[:body], crcTable) != binary.LittleEndian.Uint32(data[body:]) {
		return nil, nil, fmt.Errorf("digest cache %s is corrupt", path)
	}
	return data[len(cacheMagic):body], fi, nil
}

// writeCacheFile replaces the file at path by a cache file of the records that records
// writes, through a temporary file, streaming: they are never all in memory.
func writeCacheFile(path string, records func(*cacheWriter)) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating digest cache directory %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".digests-*.tmp")
	if err != nil {
		return fmt.Errorf("writing digest cache in %s: %w", dir, err)
	}
	w := &cacheWriter{w: bufio.NewWriterSize(tmp, 256<<10), crc: crc32.New(crcTable)}
	w.write([]byte(cacheMagic))
	records(w)
	_, _ = w.w.Write(binary.LittleEndian.AppendUint32(nil, w.crc.Sum32())) // as in cacheWriter.write
	werr := w.w.Flush()
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing digest cache %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("replacing digest cache %s: %w", path, err)
	}
	return nil
}
