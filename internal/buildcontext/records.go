package buildcontext

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
)

// The digest cache's records live in files, read through a few cached blocks: a cache of a
// million digests takes 76 MB on disk and a few MiB of memory (the bookkeeping below is 4
// to 12 bytes a digest). design/performance.md has the figures.

// recordBlock is how many records one read of a record file fetches.
const recordBlock = 128

// recordFile reads the fixed-size records of a file through a few cached blocks: a walk
// of an unchanged tree asks for them front to back, one read per block.
type recordFile struct {
	f      *os.File
	base   int64 // where record 0 starts
	size   int   // bytes per record
	n      int   // records in the file
	blocks [8]fileBlock
}

type fileBlock struct {
	no   int // block number + 1; 0 is empty
	data []byte
}

// record is record i, valid until the next call (which may reuse its block's buffer);
// nil if it could not be read.
func (r *recordFile) record(i int) []byte {
	no := i / recordBlock
	b := &r.blocks[no%len(r.blocks)]
	if b.no != no+1 {
		count := min(recordBlock, r.n-no*recordBlock)
		if cap(b.data) < recordBlock*r.size {
			b.data = make([]byte, recordBlock*r.size)
		}
		b.data = b.data[:count*r.size]
		if _, err := r.f.ReadAt(b.data, r.base+int64(no*recordBlock*r.size)); err != nil {
			b.no = 0 // the records it hid are treated as absent
			return nil
		}
		b.no = no + 1
	}
	off := (i - no*recordBlock) * r.size
	return b.data[off : off+r.size]
}

// written says the bytes of record i changed on disk: its cached block is dropped.
func (r *recordFile) written(i int) {
	no := i / recordBlock
	if b := &r.blocks[no%len(r.blocks)]; b.no == no+1 {
		b.no = 0
	}
}

func (r *recordFile) close() {
	if r != nil && r.f != nil {
		r.f.Close()
	}
}

// openCacheFile opens the cache file at path and checks its magic, length and checksum
// with one streaming read, so later reads of its records need no check; the open file
// stays the one checked even if another process replaces the path.
func openCacheFile(path string) (*recordFile, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	body := fi.Size() - 4
	records := (body - int64(len(cacheMagic))) / cacheRecordSize
	if body < int64(len(cacheMagic)) || (body-int64(len(cacheMagic)))%cacheRecordSize != 0 || records > maxCacheEntries {
		f.Close()
		return nil, nil, fmt.Errorf("digest cache %s is corrupt", path)
	}
	if err := checkCacheFile(f, body); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("digest cache %s: %w", path, err)
	}
	return &recordFile{f: f, base: int64(len(cacheMagic)), size: cacheRecordSize, n: int(records)}, fi, nil
}

// checkCacheFile checks the magic and the trailing CRC-32C of the body bytes of f.
func checkCacheFile(f *os.File, body int64) error {
	r := bufio.NewReaderSize(io.NewSectionReader(f, 0, body+4), 256<<10)
	magic := make([]byte, len(cacheMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != cacheMagic {
		return errors.New("corrupt: not a digest cache")
	}
	crc := crc32.Update(0, crcTable, magic)
	buf := make([]byte, 64<<10)
	for left := body - int64(len(cacheMagic)); left > 0; {
		n, err := io.ReadFull(r, buf[:min(int64(len(buf)), left)])
		if err != nil {
			return err
		}
		crc = crc32.Update(crc, crcTable, buf[:n])
		left -= int64(n)
	}
	var sum [4]byte
	if _, err := io.ReadFull(r, sum[:]); err != nil {
		return err
	}
	if crc != binary.LittleEndian.Uint32(sum[:]) {
		return errors.New("corrupt: checksum mismatch")
	}
	return nil
}

// keyIndex finds records by their key: open addressing over uint32 slots that hold a
// record number + 1 in the low indexBits and bits of the key's hash above them, so most
// probes for an absent key read no record. It holds at most maxIndexed records, numbered
// below maxIndexed, and no more than it was sized for.
type keyIndex struct {
	slots []uint32 // 0 is empty
	n     int
	seed  maphash.Seed
}

const (
	indexBits  = 21
	maxIndexed = 1<<indexBits - 1
	indexMask  = 1<<indexBits - 1
)

func (x *keyIndex) hash(key []byte) uint64 { return maphash.Bytes(x.seed, key) }

// tagOf is the hash bits a slot keeps beside the record number.
func tagOf(h uint64) uint32 { return uint32(h>>(64-(32-indexBits))) << indexBits }

// find is the record whose key is key, or -1; keyOf gives a record's key (nil if it
// cannot be read).
func (x *keyIndex) find(key []byte, keyOf func(int) []byte) int {
	if x.n == 0 {
		return -1
	}
	h := x.hash(key)
	tag, mask := tagOf(h), uint64(len(x.slots)-1) //nolint:gosec // a length is not negative
	for slot := h & mask; x.slots[slot] != 0; slot = (slot + 1) & mask {
		if s := x.slots[slot]; s&^indexMask == tag {
			if i := int(s&indexMask) - 1; bytes.Equal(keyOf(i), key) {
				return i
			}
		}
	}
	return -1
}

// sized is an empty index with room for n records.
func sized(n int) keyIndex {
	size := 16
	for size < 2*n {
		size *= 2
	}
	return keyIndex{slots: make([]uint32, size), seed: maphash.MakeSeed()}
}

// build indexes records 0 to n-1 (at most maxIndexed), whose keys keyOf gives.
func (x *keyIndex) build(n int, keyOf func(int) []byte) {
	*x = sized(min(n, maxIndexed))
	for i := range min(n, maxIndexed) {
		if k := keyOf(i); k != nil {
			x.put(k, i)
		}
	}
}

func (x *keyIndex) put(key []byte, i int) {
	h := x.hash(key)
	mask := uint64(len(x.slots) - 1) //nolint:gosec // a length is not negative
	slot := h & mask
	for x.slots[slot] != 0 {
		slot = (slot + 1) & mask
	}
	x.slots[slot] = tagOf(h) | uint32(i+1) //nolint:gosec // i < maxIndexed
	x.n++
}

// digestTable is the records of a cache file as read. A lookup tries the record after
// the one it found last, then an index built on first need.
type digestTable struct {
	file    *recordFile // nil when empty
	askedAt []uint32    // per record, as newDigests' askedAt: 0 if not asked for
	next    int         // the record after the one found last
	index   keyIndex
	indexed bool
}

// newDigestTable holds the records of file, of which the first asked were asked for in
// that order.
func newDigestTable(file *recordFile, asked int) digestTable {
	t := digestTable{file: file, askedAt: make([]uint32, file.n)}
	for i := range min(asked, file.n) {
		t.askedAt[i] = uint32(i + 1)
	}
	return t
}

func (t *digestTable) len() int { return len(t.askedAt) }

// record is record i (key and digest), valid until the next read; nil if unreadable.
func (t *digestTable) record(i int) []byte { return t.file.record(i) }

func (t *digestTable) key(i int) []byte {
	if r := t.record(i); r != nil {
		return r[:cacheKeySize]
	}
	return nil
}

// find is the record holding key, or -1.
func (t *digestTable) find(key []byte) int {
	if t.len() == 0 {
		return -1
	}
	if !t.indexed {
		t.index.build(t.len(), t.key)
		t.indexed = true
	}
	return t.index.find(key, t.key)
}

// locate is the record holding key, trying the one after the record found last first;
// -1 if none.
func (t *digestTable) locate(key []byte) int {
	if t.len() == 0 {
		return -1
	}
	i := t.next
	if i >= t.len() || !bytes.Equal(t.key(i), key) {
		if i = t.find(key); i < 0 {
			return -1
		}
	}
	t.next = i + 1
	return i
}

// lookup finds key's digest, noting that it was asked for as the asked-th.
func (t *digestTable) lookup(key []byte, asked uint32) ([32]byte, bool) {
	i := t.locate(key)
	if i < 0 {
		return [32]byte{}, false
	}
	r := t.record(i)
	if r == nil {
		return [32]byte{}, false
	}
	if t.askedAt[i] == 0 {
		t.askedAt[i] = asked
	}
	return [32]byte(r[cacheKeySize:]), true
}

func (t *digestTable) close() { t.file.close() }

// newDigests are the digests this process computed and the cache misses waiting for one,
// in the order asked: in memory up to spillRecords, then the older ones in an unlinked
// temporary file, since at a million files they would take about 100 MB as a map. They
// are not indexed (8 bytes a digest): a miss's record number travels with its entry to
// the store (Entry.cacheMiss), and Save drops what was computed twice.
type newDigests struct {
	dir    string      // where the temporary file goes
	file   *recordFile // the records written out, nil until the first spill
	linked bool        // the file could not be unlinked when created: release removes it
	tail   []byte      // records file.n onwards
	n      int
	stored int // records with a digest
}

const (
	// newRecordSize is a cache record, the askedAt of newDigests (0 if stored without
	// being asked for) and a flag set once the digest is.
	newRecordSize = cacheRecordSize + 4 + 1
	// spillRecords: the tail holds up to twice this many records; a spill writes out all
	// but the newest spillRecords, among which the misses being hashed find their slot.
	spillRecords = 8192
)

func (d *newDigests) record(i int) []byte {
	if d.file != nil && i < d.file.n {
		return d.file.record(i)
	}
	off := i
	if d.file != nil {
		off -= d.file.n
	}
	return d.tail[off*newRecordSize : (off+1)*newRecordSize]
}

func (d *newDigests) key(i int) []byte {
	if r := d.record(i); r != nil {
		return r[:cacheKeySize]
	}
	return nil
}

// storedRecord reports whether the newDigests record r has its digest.
func storedRecord(r []byte) bool { return r != nil && r[newRecordSize-1] != 0 }

func askedOf(r []byte) uint32 { return binary.LittleEndian.Uint32(r[cacheRecordSize:]) }

// add appends a record for key, with sum when stored, and returns its number + 1; 0 once
// maxIndexed are held: a tree that large keeps the first ones (Save keeps
// maxCacheEntries).
func (d *newDigests) add(key []byte, askedAt uint32, sum *[32]byte) uint32 {
	if d.n >= maxIndexed {
		return 0
	}
	var rec [newRecordSize]byte
	copy(rec[:], key)
	binary.LittleEndian.PutUint32(rec[cacheRecordSize:], askedAt)
	if sum != nil {
		copy(rec[cacheKeySize:], sum[:])
		rec[newRecordSize-1] = 1
		d.stored++
	}
	d.tail = append(d.tail, rec[:]...)
	d.n++
	if len(d.tail) >= 2*spillRecords*newRecordSize {
		d.spill()
	}
	return uint32(d.n) //nolint:gosec // d.n <= maxIndexed
}

// setSum stores the digest of record i, a miss until now.
func (d *newDigests) setSum(i int, sum [32]byte) {
	var b [32 + 1]byte
	copy(b[:], sum[:])
	b[32] = 1
	if d.file == nil || i >= d.file.n {
		copy(d.record(i)[cacheKeySize:], b[:32])
		d.record(i)[newRecordSize-1] = 1
		d.stored++
		return
	}
	// Written where the record's digest and flag lie; the askedAt between them is kept.
	off := d.file.base + int64(i*newRecordSize)
	// A failed write leaves the record a miss, which Save leaves out.
	if _, err := d.file.f.WriteAt(b[:32], off+cacheKeySize); err != nil {
		return
	}
	if _, err := d.file.f.WriteAt(b[32:], off+newRecordSize-1); err != nil {
		return
	}
	d.file.written(i)
	d.stored++
}

// spill writes out all but the newest spillRecords records of the tail.
func (d *newDigests) spill() {
	if d.file == nil {
		// The cache's directory, which a first run creates here.
		if err := os.MkdirAll(d.dir, 0o700); err != nil {
			return // the tail keeps growing: only memory is lost
		}
		f, err := os.CreateTemp(d.dir, ".digests-new-*.tmp")
		if err != nil {
			return // as above
		}
		// Unlinked at once where the system allows it: nothing stays behind whatever ends
		// the process. Elsewhere it is removed by release.
		d.linked = os.Remove(f.Name()) != nil
		d.file = &recordFile{f: f, size: newRecordSize}
	}
	out := len(d.tail) - spillRecords*newRecordSize
	if _, err := d.file.f.WriteAt(d.tail[:out], int64(d.file.n*newRecordSize)); err != nil {
		return // as above
	}
	if d.file.n > 0 {
		d.file.written(d.file.n - 1) // its block may have been read short
	}
	d.file.n += out / newRecordSize
	d.tail = append(d.tail[:0], d.tail[out:]...)
}

// release closes and removes the temporary file.
func (d *newDigests) release() {
	if d.file != nil {
		d.file.close()
		if d.linked {
			os.Remove(d.file.f.Name())
		}
	}
	*d = newDigests{dir: d.dir}
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
	w := &cacheWriter{w: bufio.NewWriterSize(tmp, 256<<10), crc: crc32.New(crcTable), limit: maxCacheEntries}
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
