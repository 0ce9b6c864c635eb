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

// Uploads is the grants to upload build contexts and the archives stored
// by the uploads. It is safe for concurrent use.
type Uploads struct {
	db  *bolt.DB
	now func() time.Time
}

// MaxGrantsPerArchive bounds the grants kept for one template and hash:
// a new one pushes out the one that expires first.
const MaxGrantsPerArchive = 16

// CreateGrant stores a single-use grant to upload the archive hash for
// templateID, valid for ttl. In the same transaction it prunes the expired
// grants and keeps at most MaxGrantsPerArchive for templateID and hash, so
// grants cannot pile up however many links are asked for.
func (u *Uploads) CreateGrant(templateID, hash string, ttl time.Duration) (Grant, error) {
	now := u.now().UTC()
	g := Grant{Token: RandomID(40), TemplateID: templateID, Hash: hash, ExpiresAt: now.Add(ttl)}
	err := u.db.Update(func(tx *bolt.Tx) error {
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
func (u *Uploads) PruneGrants() (int, error) {
	n := 0
	err := u.db.Update(func(tx *bolt.Tx) error {
		var err error
		n, err = pruneGrants(tx.Bucket(bucketGrants), u.now(), func(Grant) {})
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
func (u *Uploads) Grant(token string) (Grant, error) {
	var g Grant
	err := u.db.View(func(tx *bolt.Tx) error {
		var err error
		g, err = u.liveGrant(tx, token)
		return err
	})
	return g, err
}

func (u *Uploads) liveGrant(tx *bolt.Tx, token string) (Grant, error) {
	var g Grant
	found, err := getJSON(tx.Bucket(bucketGrants), token, &g)
	if err != nil {
		return g, err
	}
	if !found || !u.now().Before(g.ExpiresAt) {
		return g, ErrGrant()
	}
	return g, nil
}

// CommitUpload spends the grant and records path as the archive of its
// hash unless an archive is already stored (first write wins). It reports
// the path of the stored archive. A spent grant cannot commit again.
func (u *Uploads) CommitUpload(token, path string) (string, error) {
	stored := path
	err := u.db.Update(func(tx *bolt.Tx) error {
		g, err := u.liveGrant(tx, token)
		if err != nil {
			return err
		}
		if g.UsedAt != nil {
			return ErrGrant()
		}
		now := u.now().UTC()
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
func (u *Uploads) ArchivePath(hash string) (string, bool, error) {
	var path string
	err := u.db.View(func(tx *bolt.Tx) error {
		path = string(tx.Bucket(bucketArchives).Get([]byte(hash)))
		return nil
	})
	return path, path != "", err
}
