package store

import (
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Pooled is a container of the warm pool: started for a build under the ID
// of the sandbox it will become, not yet handed out. It is no sandbox:
// Sandbox, Sandboxes and LiveSandboxes never see it, so no client reaches
// it before CreateSandbox records it under that ID (which ends the
// record). A server that stops removes its pool; one that was killed
// finds the records at its next start, and their containers are removed
// like any container no sandbox claims.
type Pooled struct {
	ID         string    `json:"id"`
	TemplateID string    `json:"templateID"`
	BuildID    string    `json:"buildID"`
	CreatedAt  time.Time `json:"createdAt"`
}

// AddPooled records a pooled container before it is created, unless its
// template was deleted meanwhile (not found).
func (s *Sandboxes) AddPooled(p Pooled) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if _, err := liveTemplateByID(tx, p.TemplateID); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bucketPool), p.ID, p)
	})
}

// IsPooled reports whether id is recorded as a pooled container.
func (s *Sandboxes) IsPooled(id string) (bool, error) {
	found := false
	err := s.db.View(func(tx *bolt.Tx) error {
		found = tx.Bucket(bucketPool).Get([]byte(id)) != nil
		return nil
	})
	return found, err
}

// PooledSandboxes lists the pooled containers recorded.
func (s *Sandboxes) PooledSandboxes() ([]Pooled, error) {
	var out []Pooled
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPool).ForEach(func(_, v []byte) error {
			var p Pooled
			if err := json.Unmarshal(v, &p); err != nil {
				return err
			}
			out = append(out, p)
			return nil
		})
	})
	return out, err
}

// DeletePooled forgets pooled containers; an unknown ID is not an error.
func (s *Sandboxes) DeletePooled(ids ...string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPool)
		for _, id := range ids {
			if err := b.Delete([]byte(id)); err != nil {
				return err
			}
		}
		return nil
	})
}

// deleteTemplatePool forgets the pooled containers of a template being
// deleted, in its transaction.
func deleteTemplatePool(tx *bolt.Tx, templateID string) error {
	b := tx.Bucket(bucketPool)
	var ids [][]byte
	err := b.ForEach(func(k, v []byte) error {
		var p Pooled
		if err := json.Unmarshal(v, &p); err != nil {
			return err
		}
		if p.TemplateID == templateID {
			ids = append(ids, k)
		}
		return nil
	})
	for _, id := range ids {
		if err == nil {
			err = b.Delete(id)
		}
	}
	return err
}
