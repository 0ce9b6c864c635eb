package store

import (
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// LogEntry is one line of a build's log. Step is "base", "1".."N" or
// "finalize"; Level one of e2bapi's log levels.
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
	case e2bapi.LogDebug:
		return 0
	case e2bapi.LogWarn:
		return 2
	case e2bapi.LogError:
		return 3
	default:
		return 1
	}
}

// AppendLogs appends entries to the log of a build, in order.
func (s *Store) AppendLogs(buildID string, entries []LogEntry) error {
	if len(entries) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.Bucket(bucketLogs).CreateBucketIfNotExists([]byte(buildID))
		if err != nil {
			return err
		}
		for _, e := range entries {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			if err := putJSON(b, string(u64(seq)), e); err != nil {
				return err
			}
		}
		return nil
	})
}

// Logs returns the build's log entries at or above minLevel ("" = all),
// skipping the first offset of them and returning at most limit (all when
// limit < 0).
func (s *Store) Logs(buildID string, offset, limit int, minLevel string) ([]LogEntry, error) {
	var out []LogEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = logEntries(tx, buildID, offset, limit, minLevel)
		return err
	})
	return out, err
}

func logEntries(tx *bolt.Tx, buildID string, offset, limit int, minLevel string) ([]LogEntry, error) {
	out := []LogEntry{}
	b := tx.Bucket(bucketLogs).Bucket([]byte(buildID))
	if b == nil || limit == 0 {
		return out, nil
	}
	minRank := 0
	if minLevel != "" {
		minRank = LevelRank(minLevel)
	}
	c := b.Cursor()
	k, v := c.First()
	if minRank == 0 && offset > 0 {
		// Keys are the sequence 1..N, so an unfiltered offset is a seek.
		k, v = c.Seek(u64(uint64(offset) + 1))
		offset = 0
	}
	for ; k != nil; k, v = c.Next() {
		var e LogEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, err
		}
		if LevelRank(e.Level) < minRank {
			continue
		}
		if offset > 0 {
			offset--
			continue
		}
		out = append(out, e)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}
