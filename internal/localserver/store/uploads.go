package store

import (
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Grant allows one upload of the archive Hash without an API key. A spent
// grant (UsedAt set) is kept until it expires so that a client whose answer
// to the PUT was lost can repeat it and be told the archive is stored.
type Grant struct {
	Token      string     `json:"token"`
	TemplateID string     `json:"templateID"`
	Hash       string     `json:"hash"`
	ExpiresAt  time.Time  `json:"expiresAt"`
	UsedAt     *time.Time `json:"usedAt,omitempty"`
}

// Stats are counters that are not part of the E2B API.
type Stats struct {
	// Uploads counts accepted archive uploads since the data dir was created.
	Uploads  int64 `json:"uploads"`
	Archives int   `json:"archives"`
}

// CreateGrant stores a single-use grant to upload the archive hash for
// templateID, valid for ttl.
func (s *Store) CreateGrant(templateID, hash string, ttl time.Duration) (Grant, error) {
	g := Grant{Token: RandomID(40), TemplateID: templateID, Hash: hash, ExpiresAt: s.now().UTC().Add(ttl)}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return putJSON(tx.Bucket(bucketGrants), g.Token, g)
	})
	return g, err
}

// ErrGrant is deliberately the same for unknown, used and expired grants.
func ErrGrant() error {
	return errorf(KindForbidden, "the upload URL is invalid, expired or already used; ask for a new one")
}

// Grant returns the unexpired grant with this token, spent or not.
func (s *Store) Grant(token string) (Grant, error) {
	var g Grant
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		g, err = s.liveGrant(tx, token)
		return err
	})
	return g, err
}

func (s *Store) liveGrant(tx *bolt.Tx, token string) (Grant, error) {
	var g Grant
	found, err := getJSON(tx.Bucket(bucketGrants), token, &g)
	if err != nil {
		return g, err
	}
	if !found || !s.now().Before(g.ExpiresAt) {
		return g, ErrGrant()
	}
	return g, nil
}

// CommitUpload spends the grant and records path as the archive of its
// hash unless an archive is already stored (first write wins). It reports
// the path of the stored archive. A spent grant cannot commit again.
func (s *Store) CommitUpload(token, path string) (string, error) {
	stored := path
	err := s.db.Update(func(tx *bolt.Tx) error {
		g, err := s.liveGrant(tx, token)
		if err != nil {
			return err
		}
		if g.UsedAt != nil {
			return ErrGrant()
		}
		now := s.now().UTC()
		g.UsedAt = &now
		if err := putJSON(tx.Bucket(bucketGrants), token, g); err != nil {
			return err
		}
		archives := tx.Bucket(bucketArchives)
		if existing := archives.Get([]byte(g.Hash)); existing != nil {
			stored = string(existing)
		} else if err := archives.Put([]byte(g.Hash), []byte(path)); err != nil {
			return err
		}
		counters := tx.Bucket(bucketCounters)
		n := uint64(0)
		if raw := counters.Get(counterUploads); raw != nil {
			n = binary.BigEndian.Uint64(raw)
		}
		return counters.Put(counterUploads, u64(n+1))
	})
	return stored, err
}

// ArchivePath returns the stored archive of hash.
func (s *Store) ArchivePath(hash string) (string, bool, error) {
	var path string
	err := s.db.View(func(tx *bolt.Tx) error {
		path = string(tx.Bucket(bucketArchives).Get([]byte(hash)))
		return nil
	})
	return path, path != "", err
}

// Stats returns the counters of GET /_local/stats.
func (s *Store) Stats() (Stats, error) {
	var st Stats
	err := s.db.View(func(tx *bolt.Tx) error {
		if raw := tx.Bucket(bucketCounters).Get(counterUploads); raw != nil {
			st.Uploads = int64(binary.BigEndian.Uint64(raw)) //nolint:gosec // the counter only counts up from 0, one per upload
		}
		st.Archives = tx.Bucket(bucketArchives).Stats().KeyN
		return nil
	})
	return st, err
}
