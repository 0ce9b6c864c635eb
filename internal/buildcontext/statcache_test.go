//go:build unix

package buildcontext

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// settledTree writes files whose mtime lies well before now, so their digests are cached.
func settledTree(t *testing.T, entries ...treeEntry) string {
	t.Helper()
	d := newTree(t, entries...)
	past := time.Now().Add(-time.Hour)
	for _, e := range entries {
		if e.Type == "file" {
			if err := os.Chtimes(filepath.Join(d, e.Path), past, past); err != nil {
				t.Fatal(err)
			}
		}
	}
	return d
}

func hashWithCache(t *testing.T, ctxDir, src string, cache *StatCache) (string, DigestStats) {
	t.Helper()
	l := mustList(t, ctxDir, src, ListOptions{})
	stats, err := l.ComputeDigests(t.Context(), HashOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.PortableHash(t.Context(), "/app", HashOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.Save(); err != nil {
		t.Fatal(err)
	}
	return h, stats
}

func TestStatCacheWarmRunReadsNoContent(t *testing.T) {
	v := loadVectors(t)
	d := settledTree(t, v.Entries...)
	cachePath := filepath.Join(t.TempDir(), "cache", "digests.bin")

	cold, coldStats := hashWithCache(t, d, "app", OpenStatCache(cachePath))
	if coldStats.Read != 4 || coldStats.Cached != 0 {
		t.Fatalf("cold run: %+v, want 4 files read", coldStats)
	}
	// A new StatCache stands for the next terraform run (a new process).
	warm, warmStats := hashWithCache(t, d, "app", OpenStatCache(cachePath))
	if warmStats.Read != 0 || warmStats.Cached != 4 || warmStats.BytesRead != 0 {
		t.Fatalf("warm run: %+v, want every digest from the cache", warmStats)
	}
	if warm != cold {
		t.Fatalf("warm hash %s differs from cold %s", warm, cold)
	}
	if want := "c2a4f8439b33d5290a16e479dfad890b531580d26c1ce7cb216090e401785973"; warm != want {
		t.Fatalf("hash %s, want the vector %s", warm, want)
	}
}

// TestStatCacheTrustsOnlyFullIdentity rewrites a file with bytes of the same size and puts
// its mtime back: only the ctime (and not the size or mtime) tells the cache it changed.
func TestStatCacheTrustsOnlyFullIdentity(t *testing.T) {
	d := settledTree(t, file("a.txt", "aaaa"))
	cachePath := filepath.Join(t.TempDir(), "digests.bin")
	before, _ := hashWithCache(t, d, "a.txt", OpenStatCache(cachePath))

	p := filepath.Join(d, "a.txt")
	fi, _ := os.Stat(p)
	oldID, _ := identityOf(fi)
	// The ctime clock is coarse: rewrite until the ctime moves.
	for try := 0; ; try++ {
		if err := os.WriteFile(p, []byte("bbbb"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		now, _ := os.Stat(p)
		if id, _ := identityOf(now); id.CtimeNs != oldID.CtimeNs || try == 500 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	after, stats := hashWithCache(t, d, "a.txt", OpenStatCache(cachePath))
	if stats.Read != 1 {
		t.Fatalf("changed file (same size and mtime) served from cache: %+v", stats)
	}
	if after == before {
		t.Fatal("hash did not change with the content")
	}
}

func TestStatCacheSkipsRecentlyModifiedFiles(t *testing.T) {
	d := newTree(t, file("fresh.txt", "new")) // mtime is now
	cachePath := filepath.Join(t.TempDir(), "digests.bin")
	cache := OpenStatCache(cachePath)
	hashWithCache(t, d, "fresh.txt", cache)
	if cache.Len() != 0 {
		t.Fatalf("a file modified within 2 s was cached (%d entries)", cache.Len())
	}
	if _, stats := hashWithCache(t, d, "fresh.txt", OpenStatCache(cachePath)); stats.Read != 1 {
		t.Fatalf("second run: %+v, want the fresh file read again", stats)
	}
	past := time.Now().Add(-3 * time.Second)
	if err := os.Chtimes(filepath.Join(d, "fresh.txt"), past, past); err != nil {
		t.Fatal(err)
	}
	hashWithCache(t, d, "fresh.txt", OpenStatCache(cachePath))
	if _, stats := hashWithCache(t, d, "fresh.txt", OpenStatCache(cachePath)); stats.Cached != 1 {
		t.Fatalf("settled file not cached: %+v", stats)
	}
}

func TestStatCacheToleratesCorruptFile(t *testing.T) {
	d := settledTree(t, file("a.txt", "a"), file("b.txt", "b"))
	cachePath := filepath.Join(t.TempDir(), "digests.bin")
	want, _ := hashWithCache(t, d, ".", OpenStatCache(cachePath))
	good, err := os.ReadFile(cachePath)
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), good...)
	flipped[len(cacheMagic)+50] ^= 0xff // inside a digest: only the checksum can tell
	for name, data := range map[string][]byte{
		"garbage":   []byte("not a cache"),
		"truncated": good[:len(good)-7],
		"bit flip":  flipped,
		"empty":     {},
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(cachePath, data, 0o600); err != nil {
				t.Fatal(err)
			}
			got, stats := hashWithCache(t, d, ".", OpenStatCache(cachePath))
			if got != want || stats.Read != 2 {
				t.Fatalf("hash %s (stats %+v), want %s from rehashing both files", got, stats, want)
			}
			if _, stats := hashWithCache(t, d, ".", OpenStatCache(cachePath)); stats.Cached != 2 {
				t.Fatalf("cache not rewritten after corruption: %+v", stats)
			}
		})
	}
}

// TestStatCacheConcurrentSavers has several caches (as separate provider processes would)
// save to one file at once: the file stays valid and holds the entries of the last writer
// at least.
func TestStatCacheConcurrentSavers(t *testing.T) {
	var entries []treeEntry
	for i := range 40 {
		entries = append(entries, file(fmt.Sprintf("f%02d", i), fmt.Sprint(i)))
	}
	d := settledTree(t, entries...)
	cachePath := filepath.Join(t.TempDir(), "digests.bin")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 40; i += 8 {
				cache := OpenStatCache(cachePath)
				l, err := List(d, fmt.Sprintf("f%02d", i), ListOptions{})
				if err == nil {
					_, err = l.ComputeDigests(t.Context(), HashOptions{Cache: cache})
				}
				if err == nil {
					err = cache.Save()
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	records, err := readCacheFile(cachePath)
	if err != nil {
		t.Fatalf("cache file after concurrent saves: %v", err)
	}
	if len(records) == 0 {
		t.Fatal("cache file empty after concurrent saves")
	}
	if tmp, _ := filepath.Glob(filepath.Join(filepath.Dir(cachePath), ".digests-*")); len(tmp) != 0 {
		t.Errorf("temporary files left: %q", tmp)
	}
}

func TestDefaultStatCachePathHonoursXDG(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/some/cache")
	t.Setenv("HOME", "/home/nobody")
	got, err := DefaultStatCachePath()
	if err != nil {
		t.Fatal(err)
	}
	if want := "/some/cache/terraform-provider-e2b/digests-v1.bin"; got != want {
		t.Errorf("DefaultStatCachePath() = %s, want %s", got, want)
	}
}

// TestStatCacheKeepsListingOrder checks the file's order: the digests in the order the
// listing asked for them, so that a warm run finds each one right after the last and
// never needs the index, and after a change the new order first, the stale digest last.
func TestStatCacheKeepsListingOrder(t *testing.T) {
	var entries []treeEntry
	for i := range 30 {
		entries = append(entries, file(fmt.Sprintf("d%d/f%02d", i%3, i), fmt.Sprint(i)))
	}
	d := settledTree(t, entries...)
	cachePath := filepath.Join(t.TempDir(), "digests.bin")
	hashWithCache(t, d, ".", OpenStatCache(cachePath))
	assertRecordOrder(t, cachePath, mustList(t, d, ".", ListOptions{}), 30)

	warm := OpenStatCache(cachePath)
	l := mustList(t, d, ".", ListOptions{})
	if stats, err := l.ComputeDigests(t.Context(), HashOptions{Cache: warm}); err != nil || stats.Cached != 30 {
		t.Fatalf("warm run: %+v, %v; want 30 digests from the cache", stats, err)
	}
	if warm.loaded.indexed {
		t.Error("a warm run of an unchanged tree built the index")
	}

	past := time.Now().Add(-time.Hour)
	for name, content := range map[string]string{"d1/f10": "changed", "d0/f30": "new"} {
		p := filepath.Join(d, name)
		mustDo(t, os.WriteFile(p, []byte(content), 0o644))
		mustDo(t, os.Chtimes(p, past, past))
	}
	got, stats := hashWithCache(t, d, ".", OpenStatCache(cachePath))
	if stats.Read != 2 || stats.Cached != 29 {
		t.Fatalf("after changing one file and adding one: %+v, want 2 read and 29 cached", stats)
	}
	if want, _ := hashWithCache(t, d, ".", OpenStatCache(filepath.Join(t.TempDir(), "fresh.bin"))); got != want {
		t.Fatalf("hash with the cache %s, without %s", got, want)
	}
	assertRecordOrder(t, cachePath, mustList(t, d, ".", ListOptions{}), 32)
}

// assertRecordOrder checks that the cache file at path holds total records, of which the
// first are the digests of l's files in listing order.
func assertRecordOrder(t *testing.T, path string, l *Listing, total int) {
	t.Helper()
	records, err := readCacheFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != total {
		t.Fatalf("cache holds %d digests, want %d", len(records), total)
	}
	i := 0
	for _, e := range l.Entries {
		if e.Kind != KindFile {
			continue
		}
		if id := recordID(records[i]); id != e.ID {
			t.Fatalf("record %d is %+v, want %s's %+v", i, id, e.Path, e.ID)
		}
		i++
	}
}

// TestStatCacheSDKHash checks the SDK-compatible hash with a cache: the cold run gives the
// value of a run without one; the next run takes it from the step record and reads no file
// (a record altered on disk is what it returns); a changed file gives a fresh hash.
func TestStatCacheSDKHash(t *testing.T) {
	v := loadVectors(t)
	d := settledTree(t, v.Entries...)
	cachePath := filepath.Join(t.TempDir(), "digests.bin")
	cachedSDKHash := func() StreamSummary {
		t.Helper()
		cache := OpenStatCache(cachePath)
		sum := sdkHash(t, d, "app", "/app", HashOptions{Cache: cache})
		mustDo(t, cache.Save())
		return sum
	}
	uncached := sdkHash(t, d, "app", "/app", HashOptions{}).Hash
	if cold := cachedSDKHash(); cold.Hash != uncached || cold.Stats.Read != 4 {
		t.Fatalf("cold SDK hash with a cache %s (%+v), without %s", cold.Hash, cold.Stats, uncached)
	}
	if warm := cachedSDKHash(); warm.Hash != uncached || warm.Stats != (DigestStats{Cached: 4}) {
		t.Fatalf("warm SDK hash %s (%+v), want %s from the cache", warm.Hash, warm.Stats, uncached)
	}

	records, err := readCacheFile(cachePath)
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	for _, r := range records {
		if recordID(r).Mode == 0 {
			steps++
			copy(r[cacheKeySize:], make([]byte, 32))
		}
	}
	if files := len(records) - steps; steps != 1 || files != 4 {
		t.Fatalf("cache holds %d step records and %d file digests, want 1 and 4", steps, files)
	}
	mustDo(t, writeCacheFile(cachePath, func(w *cacheWriter) {
		for _, r := range records {
			w.add(r)
		}
	}))
	if got, want := cachedSDKHash().Hash, strings.Repeat("0", 64); got != want {
		t.Fatalf("SDK hash with an altered step record %s, want the record's %s: the files were read", got, want)
	}

	p := filepath.Join(d, "app/a.txt")
	mustDo(t, os.WriteFile(p, []byte("HELLO\n"), 0o644))
	past := time.Now().Add(-time.Hour)
	mustDo(t, os.Chtimes(p, past, past))
	changed := sdkHash(t, d, "app", "/app", HashOptions{}).Hash
	if got := cachedSDKHash(); got.Hash != changed || got.Hash == uncached || got.Stats.Read != 4 {
		t.Fatalf("SDK hash after a change %s (%+v), want %s read afresh (before the change %s)", got.Hash, got.Stats, changed, uncached)
	}
}

// TestStatCacheSDKHashWithoutStepRecord: when the cache holds every file's digest but not
// the step hash, the first walk reads nothing and the second reads each file once, then
// stores the step hash, which the next run takes without reading.
func TestStatCacheSDKHashWithoutStepRecord(t *testing.T) {
	v := loadVectors(t)
	d := settledTree(t, v.Entries...)
	cachePath := filepath.Join(t.TempDir(), "digests.bin")
	run := func() StreamSummary {
		t.Helper()
		cache := OpenStatCache(cachePath)
		sum := sdkHash(t, d, "app", "/app", HashOptions{Cache: cache})
		mustDo(t, cache.Save())
		return sum
	}
	want := run()
	dropStepRecords(t, cachePath)
	size := totalSize(mustList(t, d, "app", ListOptions{}))
	if got := run(); got.Hash != want.Hash || got.Fingerprint != want.Fingerprint || got.Stats != (DigestStats{Read: 4, BytesRead: size}) {
		t.Fatalf("without the step record: %+v, want %s with 4 files (%d bytes) read once", got, want.Hash, size)
	}
	if got := run(); got.Hash != want.Hash || got.Stats != (DigestStats{Cached: 4}) {
		t.Fatalf("next run %+v, want %s from the step record stored again", got, want.Hash)
	}
}

// dropStepRecords rewrites the cache file without its step records, keeping the digests.
func dropStepRecords(t *testing.T, cachePath string) {
	t.Helper()
	records, err := readCacheFile(cachePath)
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, writeCacheFile(cachePath, func(w *cacheWriter) {
		for _, r := range records {
			if !isStepRecord(r) {
				w.add(r)
			}
		}
	}))
}

// readCacheFile is every record of the cache file at path, each a copy.
func readCacheFile(path string) ([][]byte, error) {
	file, _, err := openCacheFile(path)
	if err != nil {
		return nil, err
	}
	defer file.close()
	records := make([][]byte, file.n)
	for i := range records {
		r := file.record(i)
		if r == nil {
			return nil, fmt.Errorf("record %d of %s could not be read", i, path)
		}
		records[i] = append([]byte(nil), r...)
	}
	return records, nil
}

// recordID is the stat identity a cache record is keyed by.
func recordID(r []byte) FileID {
	le := binary.LittleEndian
	return FileID{
		Dev:     le.Uint64(r[0:]),
		Ino:     le.Uint64(r[8:]),
		Size:    int64(le.Uint64(r[16:])),
		MtimeNs: int64(le.Uint64(r[24:])),
		CtimeNs: int64(le.Uint64(r[32:])),
		Mode:    le.Uint32(r[40:]),
	}
}

// syntheticID is the stat identity of the i-th of many files that need not exist: the
// cache keys digests by identity alone.
func syntheticID(i int) FileID {
	return FileID{Dev: 7, Ino: uint64(i) + 1, Size: int64(i % 4096), MtimeNs: 1e18, CtimeNs: 1e18 + int64(i), Mode: 0o100644}
}

func syntheticSum(i int) [32]byte { return sha256.Sum256([]byte(fmt.Sprint(i))) }

// syntheticEntry is the file entry of syntheticID(i).
func syntheticEntry(i int) *Entry { return &Entry{Kind: KindFile, ID: syntheticID(i)} }

// coldRun asks a new cache at path for files 0 to n-1, all missing, and stores their
// digests as the digest workers would, out of order within a window, then saves.
func coldRun(t *testing.T, path string, n int) {
	t.Helper()
	c := OpenStatCache(path)
	const window = 1000
	for start := 0; start < n; start += window {
		end := min(n, start+window)
		entries := make([]*Entry, end-start)
		for i := start; i < end; i++ {
			entries[i-start] = syntheticEntry(i)
			if _, ok := c.digest(entries[i-start]); ok {
				t.Fatalf("file %d found in a cold cache", i)
			}
		}
		for i := end - 1; i >= start; i-- {
			c.store(syntheticID(i), entries[i-start].cacheMiss, syntheticSum(i))
		}
	}
	mustDo(t, c.Save())
}

// TestStatCacheSpillsNewDigestsInOrder computes more digests than the cache keeps in
// memory: they spill into a temporary file that leaves nothing behind, in the cache's
// directory, which a first run creates, and the saved file holds them in the order asked,
// so the next run finds each right after the last.
func TestStatCacheSpillsNewDigestsInOrder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not-yet")
	path := filepath.Join(dir, "digests.bin")
	n := 3*spillRecords + 17
	coldRun(t, path, n)
	if left, _ := filepath.Glob(filepath.Join(dir, ".digests-*")); len(left) != 0 {
		t.Errorf("temporary files left: %q", left)
	}
	records, err := readCacheFile(path)
	mustDo(t, err)
	if len(records) != n {
		t.Fatalf("saved %d digests, want %d", len(records), n)
	}
	for i, r := range records {
		if recordID(r) != syntheticID(i) || [32]byte(r[cacheKeySize:]) != syntheticSum(i) {
			t.Fatalf("record %d is %+v, want file %d's digest", i, recordID(r), i)
		}
	}

	warm := OpenStatCache(path)
	for i := range n {
		if sum, ok := warm.digest(syntheticEntry(i)); !ok || sum != syntheticSum(i) {
			t.Fatalf("warm run: file %d: %x, %v", i, sum, ok)
		}
	}
	if warm.loaded.indexed {
		t.Error("a warm run in the saved order built the index")
	}
	// Asked in another order, every digest is still found, through the index.
	shuffled := OpenStatCache(path)
	for _, i := range rand.Perm(n) {
		if sum, ok := shuffled.digest(syntheticEntry(i)); !ok || sum != syntheticSum(i) {
			t.Fatalf("shuffled run: file %d: %x, %v", i, sum, ok)
		}
	}
	// A digest computed twice in one process (a file of two COPY steps, asked for by each)
	// or once more without asking (read again by the e2b-sdk hash) is saved once.
	again := OpenStatCache(filepath.Join(dir, "again.bin"))
	for range 2 {
		for i := range 2 * spillRecords {
			e := syntheticEntry(i)
			again.digest(e)
			again.store(e.ID, e.cacheMiss, syntheticSum(i))
		}
	}
	again.store(syntheticID(5), 0, syntheticSum(5))
	mustDo(t, again.Save())
	if records, err := readCacheFile(filepath.Join(dir, "again.bin")); err != nil || len(records) != 2*spillRecords {
		t.Fatalf("saved %d digests (%v), want %d", len(records), err, 2*spillRecords)
	}
}

// TestStatCacheMemoryPerDigest bounds what the cache holds per digest, cold and warm: a
// few bytes of bookkeeping each (an order number; an index slot pair while saving), not
// the digests themselves, which stay in files. Before, the digests of a cold run were a map of about
// 100 bytes each and a warm run held the whole file, 76 bytes each.
func TestStatCacheMemoryPerDigest(t *testing.T) {
	if testing.Short() {
		t.Skip("computes 200,000 digests")
	}
	path := filepath.Join(t.TempDir(), "first-run", "digests.bin")
	const n = 200_000
	cold := peakLiveHeap(t, func() { coldRun(t, path, n) })
	warm := peakLiveHeap(t, func() {
		c := OpenStatCache(path)
		for i := range n {
			if _, ok := c.digest(syntheticEntry(i)); !ok {
				t.Fatalf("file %d not cached", i)
			}
		}
		mustDo(t, c.Save())
	})
	t.Logf("peak live heap for %d digests: cold %d KiB, warm %d KiB", n, cold>>10, warm>>10)
	const limit = 4<<20 + 20*n
	if cold > limit || warm > limit {
		t.Errorf("peak live heap for %d digests: cold %d KiB, warm %d KiB; want at most %d KiB", n, cold>>10, warm>>10, limit>>10)
	}
}

// TestStatCacheKeepsStepHashOfFullCache fills the cache to its capacity with the digests
// of one step, as a cold e2b-sdk hash of as many files does, and stores the step's hash
// without asking for it first: the step hash is kept and the last file digest makes room.
func TestStatCacheKeepsStepHashOfFullCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "digests.bin")
	const files = 10
	c := OpenStatCache(path)
	c.capacity = files
	for i := range files {
		e := syntheticEntry(i)
		c.digest(e)
		c.store(e.ID, e.cacheMiss, syntheticSum(i))
	}
	fingerprint, stepSum := syntheticSum(-1), syntheticSum(-2)
	c.storeStepHash(fingerprint, stepSum)
	mustDo(t, c.Save())
	warm := OpenStatCache(path)
	if sum, ok := warm.stepHash(fingerprint); !ok || sum != stepSum {
		t.Fatalf("step hash after a save at capacity: %x, %v", sum, ok)
	}
	records, err := readCacheFile(path)
	mustDo(t, err)
	if len(records) != files || recordID(records[0]) != syntheticID(0) {
		t.Fatalf("saved %d records starting with %+v, want %d starting with file 0's", len(records), recordID(records[0]), files)
	}
}
