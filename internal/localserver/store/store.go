// Package store keeps the local server's state in a bbolt database in the
// data directory: the catalog (templates, tags, builds, snapshots and build
// logs), the sandboxes (with their logs and the warm pool's containers) and
// the uploads (grants and stored archives), each a type of its own over the
// one database (Store). Every change is one transaction, so a crash at any
// moment leaves either the state before or the state after it, and
// concurrent requests (tag moves above all) never see half of a change.
package store

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The store's errors are failure.Error values of kind NotFound, Invalid,
// Conflict or Forbidden, with messages fit to show an API client; any other
// error is the store's own failure.

var (
	bucketTemplates = []byte("templates")
	bucketAliases   = []byte("aliases")
	bucketBuilds    = []byte("builds")
	bucketTags      = []byte("tags")
	bucketGrants    = []byte("grants")
	bucketArchives  = []byte("archives")
	bucketLogs      = []byte("logs")
	bucketSandboxes = []byte("sandboxes")
	bucketCounters  = []byte("counters")
	bucketPool      = []byte("pool")
	allBuckets      = [][]byte{bucketTemplates, bucketAliases, bucketBuilds, bucketTags, bucketGrants, bucketArchives, bucketLogs, bucketSandboxes, bucketCounters, bucketPool}

	counterUploads = []byte("uploads")
)

// Store is the state database: one bbolt file whose records fall into three
// kinds, each reached through its own type so that a user takes only the
// kind it needs. A change that spans kinds (a template deleted with its
// pooled containers, a sandbox recorded with its template's spawn count) is
// still one transaction, done by the type whose change it is over plain
// functions of the other kind's buckets. It is safe for concurrent use.
type Store struct {
	// Catalog is the templates, their aliases, tags, builds, snapshots and
	// build logs.
	Catalog *Catalog
	// Sandboxes is the sandboxes, their logs and the warm pool's containers.
	Sandboxes *Sandboxes
	// Uploads is the upload grants and the stored archives.
	Uploads *Uploads

	db *bolt.DB
}

// Open opens (creating when absent) the database at path. teamSlug is the
// namespace of every alias; now is the clock (time.Now when nil).
func Open(path, teamSlug string, now func() time.Time) (*Store, error) {
	if now == nil {
		now = time.Now
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return migrateLogs(tx)
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("initialise state database %s: %w", path, err)
	}
	return &Store{
		Catalog:   &Catalog{db: db, teamSlug: teamSlug, now: now},
		Sandboxes: &Sandboxes{db: db, now: now},
		Uploads:   &Uploads{db: db, now: now},
		db:        db,
	}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func getJSON(b *bolt.Bucket, key string, v any) (bool, error) {
	raw := b.Get([]byte(key))
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("decode %s record %q: %w", b.Tx().DB().Path(), key, err)
	}
	return true, nil
}

func putJSON(b *bolt.Bucket, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put([]byte(key), raw)
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// RandomID returns n random characters of [a-z0-9].
func RandomID(n int) string {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	for i, b := range buf {
		buf[i] = idAlphabet[int(b)%len(idAlphabet)]
	}
	return string(buf)
}

func u64(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

// tagKeyPrefix is the key prefix of every assignment of tag in templateID;
// the assignment keys end with the bucket sequence, so they sort by age.
func tagKeyPrefix(templateID, tag string) []byte {
	return []byte(templateID + "\x00" + tag + "\x00")
}

func templateKeyPrefix(templateID string) []byte {
	return []byte(templateID + "\x00")
}

// forEachPrefix calls fn for every key of b starting with prefix, in order.
func forEachPrefix(b *bolt.Bucket, prefix []byte, fn func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}
