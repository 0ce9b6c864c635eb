package store

import (
	"encoding/binary"
	"encoding/json"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

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
func (s *Store) AppendLogs(buildID string, entries []e2bapi.BuildLogEntry) error {
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
func (s *Store) Logs(buildID string, offset, limit int, minLevel string) ([]e2bapi.BuildLogEntry, error) {
	var out []e2bapi.BuildLogEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = logEntries(tx, buildID, offset, limit, minLevel)
		return err
	})
	return out, err
}

func logEntries(tx *bolt.Tx, buildID string, offset, limit int, minLevel string) ([]e2bapi.BuildLogEntry, error) {
	out := []e2bapi.BuildLogEntry{}
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
		var e e2bapi.BuildLogEntry
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

// CreateGrant stores a single-use grant to upload the archive hash for
// templateID, valid for ttl.
func (s *Store) CreateGrant(templateID, hash string, ttl time.Duration) (Grant, error) {
	g := Grant{Token: RandomID(40), TemplateID: templateID, Hash: hash, ExpiresAt: s.now().UTC().Add(ttl)}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return putJSON(tx.Bucket(bucketGrants), g.Token, g)
	})
	return g, err
}

// errGrant is deliberately the same for unknown, used and expired grants.
func errGrant() error {
	return errorf(KindForbidden, "the upload URL is invalid, expired or already used; ask for a new one")
}

// Grant returns the live grant with this token.
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
		return g, errGrant()
	}
	return g, nil
}

// CommitUpload consumes the grant and records path as the archive of its
// hash unless an archive is already stored (first write wins). It reports
// the path of the stored archive.
func (s *Store) CommitUpload(token, path string) (string, error) {
	stored := path
	err := s.db.Update(func(tx *bolt.Tx) error {
		g, err := s.liveGrant(tx, token)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketGrants).Delete([]byte(token)); err != nil {
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
			st.Uploads = int64(binary.BigEndian.Uint64(raw))
		}
		st.Archives = tx.Bucket(bucketArchives).Stats().KeyN
		return nil
	})
	return st, err
}

// CreateSandbox records a started sandbox and counts the spawn on its
// template, unless the template was deleted meanwhile.
func (s *Store) CreateSandbox(sb Sandbox) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		templates := tx.Bucket(bucketTemplates)
		var t Template
		found, err := getJSON(templates, sb.TemplateID, &t)
		if err != nil {
			return err
		}
		if !found || t.Deleted {
			return errorf(KindNotFound, "template '%s' not found", sb.TemplateID)
		}
		at := sb.StartedAt
		t.LastSpawnedAt = &at
		t.SpawnCount++
		if err := putJSON(templates, t.ID, t); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bucketSandboxes), sb.ID, sb)
	})
}

// Sandbox returns a recorded sandbox.
func (s *Store) Sandbox(id string) (Sandbox, error) {
	var sb Sandbox
	err := s.db.View(func(tx *bolt.Tx) error {
		found, err := getJSON(tx.Bucket(bucketSandboxes), id, &sb)
		if err == nil && !found {
			return errorf(KindNotFound, "sandbox '%s' not found", id)
		}
		return err
	})
	return sb, err
}

// Sandboxes lists the recorded sandboxes, oldest first.
func (s *Store) Sandboxes() ([]Sandbox, error) {
	var out []Sandbox
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSandboxes).ForEach(func(_, v []byte) error {
			var sb Sandbox
			if err := json.Unmarshal(v, &sb); err != nil {
				return err
			}
			out = append(out, sb)
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, err
}

// DeleteSandbox forgets a sandbox; false when it was not recorded.
func (s *Store) DeleteSandbox(id string) (bool, error) {
	found := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSandboxes)
		found = b.Get([]byte(id)) != nil
		return b.Delete([]byte(id))
	})
	return found, err
}

// SetSandboxEndAt moves the expiry of a sandbox.
func (s *Store) SetSandboxEndAt(id string, endAt time.Time) error {
	_, err := s.updateSandbox(id, func(sb *Sandbox) { sb.EndAt = endAt.UTC() })
	return err
}

// ExtendSandboxEndAt moves the sandbox's end to endAt when that is later, never earlier,
// and returns the sandbox.
func (s *Store) ExtendSandboxEndAt(id string, endAt time.Time) (Sandbox, error) {
	return s.updateSandbox(id, func(sb *Sandbox) {
		if endAt.After(sb.EndAt) {
			sb.EndAt = endAt.UTC()
		}
	})
}

func (s *Store) updateSandbox(id string, change func(*Sandbox)) (Sandbox, error) {
	var sb Sandbox
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSandboxes)
		found, err := getJSON(b, id, &sb)
		if err != nil {
			return err
		}
		if !found {
			return errorf(KindNotFound, "sandbox '%s' not found", id)
		}
		change(&sb)
		return putJSON(b, id, sb)
	})
	return sb, err
}
