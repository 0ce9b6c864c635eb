package store

import (
	"encoding/binary"
	"encoding/json"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"sort"
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
	// Grants counts the upload grants kept (live ones and spent ones
	// that have not expired yet).
	Grants int `json:"grants"`
	// Pooled counts the warm pool's containers, started or starting.
	Pooled int `json:"pooled"`
}

// MaxGrantsPerArchive bounds the grants kept for one template and hash:
// a new one pushes out the one that expires first.
const MaxGrantsPerArchive = 16

// CreateGrant stores a single-use grant to upload the archive hash for
// templateID, valid for ttl. In the same transaction it prunes the expired
// grants and keeps at most MaxGrantsPerArchive for templateID and hash, so
// grants cannot pile up however many links are asked for.
func (s *Store) CreateGrant(templateID, hash string, ttl time.Duration) (Grant, error) {
	now := s.now().UTC()
	g := Grant{Token: RandomID(40), TemplateID: templateID, Hash: hash, ExpiresAt: now.Add(ttl)}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketGrants)
		var same []Grant
		_, err := pruneGrants(b, now, func(old Grant) {
			if old.TemplateID == templateID && old.Hash == hash {
				same = append(same, old)
			}
		})
		if err != nil {
			return err
		}
		sort.Slice(same, func(i, j int) bool { return same[i].ExpiresAt.Before(same[j].ExpiresAt) })
		for len(same) >= MaxGrantsPerArchive {
			if err := b.Delete([]byte(same[0].Token)); err != nil {
				return err
			}
			same = same[1:]
		}
		return putJSON(b, g.Token, g)
	})
	return g, err
}

// PruneGrants deletes the expired grants, spent or not, and reports how
// many it deleted.
func (s *Store) PruneGrants() (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		n, err = pruneGrants(tx.Bucket(bucketGrants), s.now(), func(Grant) {})
		return err
	})
	return n, err
}

// pruneGrants deletes b's grants expired at now, calls live with the
// others and reports how many it deleted.
func pruneGrants(b *bolt.Bucket, now time.Time, live func(Grant)) (int, error) {
	var expired [][]byte
	err := b.ForEach(func(k, v []byte) error {
		var g Grant
		if err := json.Unmarshal(v, &g); err != nil {
			return err
		}
		if now.Before(g.ExpiresAt) {
			live(g)
		} else {
			expired = append(expired, k)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, k := range expired {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(expired), nil
}

// ErrGrant is deliberately the same for unknown, used and expired grants.
func ErrGrant() error {
	return failure.New(failure.Forbidden, "the upload URL is invalid, expired or already used; ask for a new one")
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
		st.Grants = tx.Bucket(bucketGrants).Stats().KeyN
		st.Pooled = tx.Bucket(bucketPool).Stats().KeyN
		return nil
	})
	return st, err
}
