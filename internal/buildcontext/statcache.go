package buildcontext

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
)

// StatCache is the persistent digest cache: file digests keyed by stat identity, so a
// second hash of an unchanged tree reads metadata only. It is safe for concurrent use by
// goroutines; several processes may share one file (each Save merges what is on disk and
// replaces the file atomically; a lost race only loses cache entries, never correctness).
type StatCache struct {
	path string

	mu sync.Mutex
	// entries point into one slice per loaded file, so marking an entry used on lookup
	// writes through the pointer instead of storing into the map again.
	entries map[FileID]*cachedDigest
	dirty   bool
}

type cachedDigest struct {
	sum  [32]byte
	used bool // looked up or stored by this process: kept first when the cache is trimmed
}

const (
	cacheMagic = "E2BDIG01"
	// cacheRecordSize is dev, ino, size, mtime, ctime (8 bytes each), mode (4) and sha256.
	cacheRecordSize = 5*8 + 4 + 32
	// maxCacheEntries bounds the file (about 7.6 MB) and the memory it takes.
	maxCacheEntries = 100_000
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
// an empty cache: the files are simply hashed again. The file is read and decoded on its
// own goroutine, which holds mu until done, so it overlaps the listing that usually
// follows; every method waits for it by taking mu.
func OpenStatCache(path string) *StatCache {
	c := &StatCache{path: path}
	c.mu.Lock()
	go func() {
		defer c.mu.Unlock()
		if m, err := readCacheFile(path); err == nil {
			c.entries = m
		} else {
			c.entries = map[FileID]*cachedDigest{}
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
	return len(c.entries)
}

func (c *StatCache) lookup(id FileID) ([32]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.entries[id]
	if !ok {
		return [32]byte{}, false
	}
	d.used = true
	return d.sum, true
}

func (c *StatCache) store(id FileID, sum [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[id] = &cachedDigest{sum: sum, used: true}
	c.dirty = true
}

// Save writes new digests to the cache file: it merges the entries another process may
// have saved meanwhile, keeps at most maxCacheEntries (those used by this process first),
// and replaces the file by renaming a fully written temporary file over it.
func (c *StatCache) Save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return nil
	}
	merged := make(map[FileID]*cachedDigest, len(c.entries))
	if onDisk, err := readCacheFile(c.path); err == nil {
		for id, d := range onDisk {
			merged[id] = d
		}
	}
	for id, d := range c.entries {
		merged[id] = d
	}
	if err := writeCacheFile(c.path, merged); err != nil {
		return err
	}
	c.entries = merged
	c.dirty = false
	return nil
}

func readCacheFile(path string) (map[FileID]*cachedDigest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	body := len(data) - 4
	if body < len(cacheMagic) || string(data[:len(cacheMagic)]) != cacheMagic ||
		(body-len(cacheMagic))%cacheRecordSize != 0 ||
		crc32.Checksum(data[:body], crcTable) != binary.LittleEndian.Uint32(data[body:]) {
		return nil, fmt.Errorf("digest cache %s is corrupt", path)
	}
	records := data[len(cacheMagic):body]
	digests := make([]cachedDigest, len(records)/cacheRecordSize)
	m := make(map[FileID]*cachedDigest, len(digests))
	le := binary.LittleEndian
	for i, r := 0, records; len(r) > 0; i, r = i+1, r[cacheRecordSize:] {
		id := FileID{
			Dev:     le.Uint64(r[0:]),
			Ino:     le.Uint64(r[8:]),
			Size:    int64(le.Uint64(r[16:])),
			MtimeNs: int64(le.Uint64(r[24:])),
			CtimeNs: int64(le.Uint64(r[32:])),
			Mode:    le.Uint32(r[40:]),
		}
		d := &digests[i]
		copy(d.sum[:], r[44:cacheRecordSize])
		m[id] = d
	}
	return m, nil
}

// writeCacheFile keeps at most maxCacheEntries, preferring entries used by this process.
func writeCacheFile(path string, m map[FileID]*cachedDigest) error {
	var buf bytes.Buffer
	buf.Grow(len(cacheMagic) + min(len(m), maxCacheEntries)*cacheRecordSize + 4)
	buf.WriteString(cacheMagic)
	le := binary.LittleEndian
	var rec [cacheRecordSize]byte
	n := 0
	for pass := 0; pass < 2; pass++ {
		for id, d := range m {
			if n == maxCacheEntries {
				break
			}
			if d.used != (pass == 0) {
				continue
			}
			le.PutUint64(rec[0:], id.Dev)
			le.PutUint64(rec[8:], id.Ino)
			le.PutUint64(rec[16:], uint64(id.Size))
			le.PutUint64(rec[24:], uint64(id.MtimeNs))
			le.PutUint64(rec[32:], uint64(id.CtimeNs))
			le.PutUint32(rec[40:], id.Mode)
			copy(rec[44:], d.sum[:])
			buf.Write(rec[:])
			n++
		}
	}
	buf.Write(le.AppendUint32(nil, crc32.Checksum(buf.Bytes(), crcTable)))

	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating digest cache directory %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".digests-*.tmp")
	if err != nil {
		return fmt.Errorf("writing digest cache in %s: %w", dir, err)
	}
	_, werr := tmp.Write(buf.Bytes())
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
