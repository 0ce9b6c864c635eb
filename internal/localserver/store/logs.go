package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// LogEntry is one line of a build's log. Step is "base", "1".."N" or
// "finalize"; Level one of e2b's log levels.
type LogEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Message   string    `json:"message"`
	Level     string    `json:"level"`
	Step      string    `json:"step,omitempty"`
}

// LevelRank orders log levels (debug < info < warn < error); unknown levels
// rank as info.
func LevelRank(level string) int {
	switch level {
	case e2b.LogDebug:
		return 0
	case e2b.LogWarn:
		return 2
	case e2b.LogError:
		return 3
	default:
		return 1
	}
}

// LogBound is how much of one log the store keeps: at most MaxEntries
// entries and MaxBytes bytes of messages (zero or less: no bound on that
// measure). Half of each goes to the log's beginning (its head), half to
// its end (its tail), as E2B keeps the beginning and the end of long logs;
// a marker entry between them says what was dropped.
type LogBound struct {
	MaxEntries int
	MaxBytes   int64
}

// Defaults of LogBound.
const (
	DefaultMaxLogEntries = 10_000
	DefaultMaxLogBytes   = 4 << 20
)

func (b LogBound) head() (int, int64) { return share(b.MaxEntries, false), share(b.MaxBytes, false) }

func (b LogBound) tail() (int, int64) { return share(b.MaxEntries, true), share(b.MaxBytes, true) }

// share is the head's half of a bound, or the tail's (the rest); -1 when
// there is no bound.
func share[N int | int64](n N, tail bool) N {
	switch {
	case n <= 0:
		return -1
	case tail:
		return n - n/2
	default:
		return n / 2
	}
}

func within[N int | int64](n, limit N) bool { return limit < 0 || n <= limit }

// Each log is a bucket under bucketLogs named by the log's ID, holding:
//
//   - logMetaKey: the logMeta record;
//   - logEntriesBucket: sequence (u64) → the entry's time key's millisecond
//     (u64) followed by the entry's JSON. The head is 1..Head; Head+1 is
//     the marker once something was dropped; the tail runs from TailFirst
//     on, without gaps (only its oldest entries are ever removed);
//   - logTimesBucket: millisecond (u64) + sequence (u64) → the entry's
//     level rank (one byte), the order of the time cursors. The
//     millisecond is the entry's, raised to the log's latest so far, so
//     that time order is append order and a cursor is a seek.
//
// An earlier layout kept sequence → JSON directly in the log's bucket;
// Open migrates it (migrateLogs).
var (
	logMetaKey       = []byte("meta")
	logEntriesBucket = []byte("entries")
	logTimesBucket   = []byte("times")
)

// logMeta is what a log's appends and pages need to know of it.
type logMeta struct {
	Next       uint64 `json:"next"` // the sequence of the next entry
	Head       int    `json:"head"`
	HeadBytes  int64  `json:"headBytes"`
	HeadClosed bool   `json:"headClosed"` // later entries go to the tail
	TailFirst  uint64 `json:"tailFirst"`
	TailCount  int    `json:"tailCount"`
	TailBytes  int64  `json:"tailBytes"`
	LastMilli  int64  `json:"lastMilli"`
	// Last is the timestamp of the latest entry appended, kept or not.
	Last time.Time `json:"last"`
	// Dropped and DroppedBytes count the tail entries removed; Marker is
	// the first of them, where the marker entry stands.
	Dropped      int       `json:"dropped"`
	DroppedBytes int64     `json:"droppedBytes"`
	Marker       *LogEntry `json:"marker,omitempty"`
	MarkerMilli  int64     `json:"markerMilli"`
}

// markerSeq is the sequence of the marker entry.
func (m *logMeta) markerSeq() uint64 { return uint64(m.Head) + 1 } //nolint:gosec // a count

// seqAt is the sequence of the entry at position p of the kept log (head,
// marker, tail), or 0 when there is none.
func (m *logMeta) seqAt(p int) uint64 {
	if p < m.Head {
		return uint64(p) + 1 //nolint:gosec // not negative
	}
	p -= m.Head
	if m.Dropped > 0 {
		if p == 0 {
			return m.markerSeq()
		}
		p--
	}
	if p >= m.TailCount {
		return 0
	}
	return m.TailFirst + uint64(p) //nolint:gosec // not negative
}

// markerEntry says what the log dropped, in the shape of E2B's entries, at
// the time and step of the first entry dropped.
func (m *logMeta) markerEntry() LogEntry {
	return LogEntry{
		Timestamp: m.Marker.Timestamp, Level: e2b.LogWarn, Step: m.Marker.Step,
		Message: fmt.Sprintf("[%d log entries (%d bytes) dropped here: the log keeps its beginning and its end]", m.Dropped, m.DroppedBytes),
	}
}

// logBuckets are the parts of one log.
type logBuckets struct {
	root, entries, times *bolt.Bucket
	meta                 logMeta
}

// openLog returns the log's buckets; ok is false when it has none and
// create is false.
func openLog(tx *bolt.Tx, logID string, create bool) (l logBuckets, ok bool, err error) {
	logs := tx.Bucket(bucketLogs)
	if l.root = logs.Bucket([]byte(logID)); l.root == nil {
		if !create {
			return l, false, nil
		}
		if l.root, err = logs.CreateBucket([]byte(logID)); err != nil {
			return l, false, err
		}
		if l.entries, err = l.root.CreateBucket(logEntriesBucket); err != nil {
			return l, false, err
		}
		if l.times, err = l.root.CreateBucket(logTimesBucket); err != nil {
			return l, false, err
		}
		l.meta.Next = 1
		return l, true, nil
	}
	l.entries, l.times = l.root.Bucket(logEntriesBucket), l.root.Bucket(logTimesBucket)
	if l.entries == nil || l.times == nil {
		return l, false, fmt.Errorf("log %s has neither layout of the store", logID)
	}
	if err := json.Unmarshal(l.root.Get(logMetaKey), &l.meta); err != nil {
		return l, false, fmt.Errorf("decode the record of log %s: %w", logID, err)
	}
	return l, true, nil
}

func timeKey(milli int64, seq uint64) []byte {
	return append(u64(uint64(milli)), u64(seq)...) //nolint:gosec // Unix milliseconds of log lines are positive
}

func (l *logBuckets) put(seq uint64, milli int64, e LogEntry) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := l.entries.Put(u64(seq), append(u64(uint64(milli)), raw...)); err != nil { //nolint:gosec // as timeKey
		return err
	}
	return l.times.Put(timeKey(milli, seq), []byte{byte(LevelRank(e.Level))}) //nolint:gosec // a rank is 0..3
}

// get reads the entry of seq and the millisecond of its time key.
func (l *logBuckets) get(seq uint64) (LogEntry, int64, error) {
	var e LogEntry
	raw := l.entries.Get(u64(seq))
	if len(raw) < 8 {
		return e, 0, fmt.Errorf("log entry %d is missing", seq)
	}
	milli := int64(binary.BigEndian.Uint64(raw)) //nolint:gosec // written from an int64
	return e, milli, json.Unmarshal(raw[8:], &e)
}

// append adds e to the head while the head has room, else to the tail,
// whose oldest entries then go until it is within its share of bound.
func (l *logBuckets) append(e LogEntry, bound LogBound) error {
	m := &l.meta
	milli := max(e.Timestamp.UnixMilli(), m.LastMilli)
	m.LastMilli = milli
	if e.Timestamp.After(m.Last) {
		m.Last = e.Timestamp
	}
	size := int64(len(e.Message))
	headEntries, headBytes := bound.head()
	if !m.HeadClosed && within(m.Head+1, headEntries) && within(m.HeadBytes+size, headBytes) {
		m.Head++
		m.HeadBytes += size
		m.Next = uint64(m.Head) + 1            //nolint:gosec // a count
		return l.put(uint64(m.Head), milli, e) //nolint:gosec // a count
	}
	if !m.HeadClosed {
		m.HeadClosed = true
		m.Next = m.markerSeq() + 1
		m.TailFirst = m.Next
	}
	if err := l.put(m.Next, milli, e); err != nil {
		return err
	}
	m.Next++
	m.TailCount++
	m.TailBytes += size
	tailEntries, tailBytes := bound.tail()
	for m.TailCount > 0 && (!within(m.TailCount, tailEntries) || !within(m.TailBytes, tailBytes)) {
		if err := l.dropOldest(); err != nil {
			return err
		}
	}
	return nil
}

func (l *logBuckets) dropOldest() error {
	m := &l.meta
	old, milli, err := l.get(m.TailFirst)
	if err != nil {
		return err
	}
	if err := l.entries.Delete(u64(m.TailFirst)); err != nil {
		return err
	}
	if err := l.times.Delete(timeKey(milli, m.TailFirst)); err != nil {
		return err
	}
	size := int64(len(old.Message))
	if m.Marker == nil {
		m.Marker, m.MarkerMilli = &old, milli
	}
	m.Dropped++
	m.DroppedBytes += size
	m.TailFirst++
	m.TailCount--
	m.TailBytes -= size
	return nil
}

// save writes the log's record and, when something was dropped, its marker.
func (l *logBuckets) save() error {
	if l.meta.Dropped > 0 {
		if err := l.put(l.meta.markerSeq(), l.meta.MarkerMilli, l.meta.markerEntry()); err != nil {
			return err
		}
	}
	raw, err := json.Marshal(l.meta)
	if err != nil {
		return err
	}
	return l.root.Put(logMetaKey, raw)
}

// AppendLogs appends entries to the log of a build, in order, keeping the
// log within bound.
func (c *Catalog) AppendLogs(buildID string, bound LogBound, entries []LogEntry) error {
	if len(entries) == 0 {
		return nil
	}
	return c.db.Update(func(tx *bolt.Tx) error {
		return appendLogs(tx, buildID, bound, entries)
	})
}

func appendLogs(tx *bolt.Tx, logID string, bound LogBound, entries []LogEntry) error {
	l, _, err := openLog(tx, logID, true)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := l.append(e, bound); err != nil {
			return err
		}
	}
	return l.save()
}

// sandboxLogID is the ID of a sandbox's log; a build's log has the build's
// ID, a UUID.
func sandboxLogID(sandboxID string) string { return "sandbox/" + sandboxID }

// SandboxLogSince is the time the sandbox's container log is to be read
// again from: that of its last stored line (the zero time when none).
func (s *Sandboxes) SandboxLogSince(sandboxID string) (time.Time, error) {
	var since time.Time
	err := s.db.View(func(tx *bolt.Tx) error {
		l, ok, err := openLog(tx, sandboxLogID(sandboxID), false)
		if ok {
			since = l.meta.Last
		}
		return err
	})
	return since, err
}

// AppendSandboxLogs appends to a sandbox's log, within bound, the entries
// later than its last: lines read again from SandboxLogSince on, maybe by
// two requests at once, are stored once. A sandbox without a record gets
// no log, so that none outlives DeleteSandbox.
func (s *Sandboxes) AppendSandboxLogs(sandboxID string, bound LogBound, entries []LogEntry) error {
	if len(entries) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketSandboxes).Get([]byte(sandboxID)) == nil {
			return nil
		}
		logID := sandboxLogID(sandboxID)
		l, ok, err := openLog(tx, logID, false)
		if err != nil {
			return err
		}
		if ok {
			entries = slices.DeleteFunc(slices.Clone(entries), func(e LogEntry) bool { return !e.Timestamp.After(l.meta.Last) })
		}
		return appendLogs(tx, logID, bound, entries)
	})
}

// deleteLog removes a log; a missing one is not an error.
func deleteLog(tx *bolt.Tx, logID string) error {
	if err := tx.Bucket(bucketLogs).DeleteBucket([]byte(logID)); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
		return err
	}
	return nil
}

// migrateLogs rewrites the logs of the earlier layout (sequence → JSON in
// the log's own bucket) into the current one, every entry kept: such a log
// is a finished build's, whatever its length.
func migrateLogs(tx *bolt.Tx) error {
	logs := tx.Bucket(bucketLogs)
	var old [][]byte
	err := logs.ForEach(func(k, v []byte) error {
		if b := logs.Bucket(k); v == nil && b != nil && b.Get(logMetaKey) == nil {
			old = append(old, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range old {
		var entries []LogEntry
		err := logs.Bucket(id).ForEach(func(k, v []byte) error {
			var e LogEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decode entry %x of log %s: %w", k, id, err)
			}
			entries = append(entries, e)
			return nil
		})
		if err != nil {
			return err
		}
		if err := logs.DeleteBucket(id); err != nil {
			return err
		}
		l, _, err := openLog(tx, string(id), true)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := l.append(e, LogBound{}); err != nil {
				return err
			}
		}
		if err := l.save(); err != nil {
			return err
		}
	}
	return nil
}
