package store

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// Catalog is what the server knows of its templates: their names (aliases
// in the team's namespace), tags, builds, snapshots and build logs, the
// records a reference resolves through. It is safe for concurrent use.
type Catalog struct {
	db       *bolt.DB
	teamSlug string
	now      func() time.Time
}

// TeamSlug is the namespace of the one team this server has.
func (c *Catalog) TeamSlug() string { return c.teamSlug }

// Name is the public name of t ("<slug>/<alias>").
func (c *Catalog) Name(t Template) string { return c.teamSlug + "/" + t.Alias }
