package store

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// Stats are counters that are not part of the E2B API.
type Stats struct {
	// Uploads counts accepted archive uploads since the data dir was created.
	Uploads  int64 `json:"uploads"`
	Archives int   `json:"archives"`
	// Grants counts the upload grants kept (live ones and spent ones
	// that have not expired yet).
	Grants int `json:"grants"`
	// Pooled counts the warm pool's containers, started or starting.
	Pooled int `json:"pooled"`
}

// Stats returns the counters of GET /_local/stats, read across the kinds in
// one transaction.
func (s *Store) Stats() (Stats, error) {
	var st Stats
	err := s.db.View(func(tx *bolt.Tx) error {
		if raw := tx.Bucket(bucketCounters).Get(counterUploads); raw != nil {
			st.Uploads = int64(binary.BigEndian.Uint64(raw)) //nolint:gosec // the counter only counts up from 0, one per upload
		}
		st.Archives = tx.Bucket(bucketArchives).Stats().KeyN
		st.Grants = tx.Bucket(bucketGrants).Stats().KeyN
		st.Pooled = tx.Bucket(bucketPool).Stats().KeyN
		return nil
	})
	return st, err
}
