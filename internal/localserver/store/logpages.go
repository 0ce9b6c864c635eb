package store

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// Pages of a log: by position (the build status's logsOffset) and by time
// (the cursors of the /logs endpoints), each a seek in the log's buckets.

// Logs returns the build's kept log entries (head, marker, tail) at or
// above minLevel ("" = all), skipping the first offset of them and
// returning at most limit (all when limit < 0). Without a level the
// offset is a seek; with one, the entries before it are scanned (their
// level is in the time keys' values, so no entry is decoded), at most the
// log's bound.
func (c *Catalog) Logs(buildID string, offset, limit int, minLevel string) ([]LogEntry, error) {
	var out []LogEntry
	err := c.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = logEntries(tx, buildID, offset, limit, minLevel)
		return err
	})
	return out, err
}

func logEntries(tx *bolt.Tx, buildID string, offset, limit int, minLevel string) ([]LogEntry, error) {
	out := []LogEntry{}
	l, ok, err := openLog(tx, buildID, false)
	if err != nil || !ok || limit == 0 {
		return out, err
	}
	minRank := levelRankOf(minLevel)
	c := l.times.Cursor()
	k, v := c.First()
	if minRank == 0 {
		seq := l.meta.seqAt(offset)
		if seq == 0 {
			return out, nil
		}
		_, milli, err := l.get(seq)
		if err != nil {
			return nil, err
		}
		k, v = c.Seek(timeKey(milli, seq))
		offset = 0
	}
	for ; k != nil; k, v = c.Next() {
		if int(v[0]) < minRank {
			continue
		}
		if offset > 0 {
			offset--
			continue
		}
		e, _, err := l.get(binary.BigEndian.Uint64(k[8:]))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}

func levelRankOf(minLevel string) int {
	if minLevel == "" {
		return 0
	}
	return LevelRank(minLevel)
}

// LogQuery asks for one page of a log by time.
type LogQuery struct {
	// Cursor is a Unix millisecond (-1: none): going forward the page
	// holds entries at or after it, oldest first; going Backward, those at
	// or before it, newest first.
	Cursor   int64
	Backward bool
	Limit    int
	MinLevel string
	// Match, when set, is a further filter.
	Match func(LogEntry) bool
}

// LogPage returns one page of the build's kept log (logPage).
func (c *Catalog) LogPage(buildID string, q LogQuery) ([]LogEntry, error) {
	var out []LogEntry
	err := c.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = logPage(tx, buildID, q)
		return err
	})
	return out, err
}

// SandboxLogPage returns one page of the sandbox's kept log (logPage).
func (s *Sandboxes) SandboxLogPage(sandboxID string, q LogQuery) ([]LogEntry, error) {
	var out []LogEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = logPage(tx, sandboxLogID(sandboxID), q)
		return err
	})
	return out, err
}

// logPage returns one page of the kept log of logID. It seeks the cursor
// and reads forward (or backward) only as far as the page needs: a page
// costs its own entries, plus, under a level or Match filter, the entries
// that filter skips, which for a filter that matches little is up to the
// whole kept log (the log's bound).
func logPage(tx *bolt.Tx, logID string, q LogQuery) ([]LogEntry, error) {
	out := []LogEntry{}
	l, ok, err := openLog(tx, logID, false)
	if err != nil || !ok || q.Limit <= 0 {
		return out, err
	}
	minRank := levelRankOf(q.MinLevel)
	c := l.times.Cursor()
	var k, v []byte
	next := c.Next
	switch {
	case q.Backward && q.Cursor >= 0:
		// The last key at or before the cursor's millisecond.
		if k, _ = c.Seek(u64(uint64(q.Cursor) + 1)); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		next = c.Prev
	case q.Backward:
		k, v = c.Last()
		next = c.Prev
	case q.Cursor >= 0:
		k, v = c.Seek(u64(uint64(q.Cursor)))
	default:
		k, v = c.First()
	}
	for ; k != nil && len(out) < q.Limit; k, v = next() {
		if int(v[0]) < minRank {
			continue
		}
		e, _, err := l.get(binary.BigEndian.Uint64(k[8:]))
		if err != nil {
			return nil, err
		}
		if q.Match == nil || q.Match(e) {
			out = append(out, e)
		}
	}
	return out, nil
}
