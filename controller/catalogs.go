package controller

import (
	"log/slog"
	"time"

	"github.com/tether-mcp/tether/controller/catalog"
	"github.com/tether-mcp/tether/controller/supervisor"
	"github.com/tether-mcp/tether/spec"
)

// CatalogStore keeps what each server publishes between runs
// (controller/state).
type CatalogStore interface {
	LoadCatalog(name string) (*catalog.Catalog, error)
	SaveCatalog(name string, c *catalog.Catalog) error
	DeleteCatalog(name string) error
}

// maxCatalogNames caps status.catalog.added and .removed.
const maxCatalogNames = 20

// catalogState is a record's view of its server's catalog: the last one
// seen (or saved by an earlier run), its names, and how it last moved.
// Only the connection's Reconcile touches it.
type catalogState struct {
	cur    *catalog.Catalog
	hash   string
	names  []string
	status *spec.CatalogStatus
	saved  bool // cur is what the store holds, or too large for it (catalog.TooLargeError)
	// the session's lists it was taken from: a session hands out a new
	// slice when a list changes, so an unchanged catalog costs no hashing.
	from [4]any
}

// observe takes in the live session's catalog and reports what changed.
// It returns whether the catalog moved (not on the first sight of a
// connection that had none).
func (c *catalogState) observe(ss supervisor.Session, now time.Time) (moved bool, added, removed []string) {
	tools, prompts, resources, templates := ss.Tools(), ss.Prompts(), ss.Resources(), ss.ResourceTemplates()
	from := [4]any{sliceID(tools), sliceID(prompts), sliceID(resources), sliceID(templates)}
	if c.cur != nil && from == c.from {
		return false, nil, nil
	}
	c.from = from
	next := &catalog.Catalog{Tools: tools, Prompts: prompts, Resources: resources, ResourceTemplates: templates}
	hash := next.Hash()
	if hash == c.hash {
		c.cur = next
		return false, nil, nil
	}
	names := next.Names()
	changed := now.UTC().Truncate(time.Second)
	if c.hash != "" {
		moved = true
		if c.names != nil { // else only the hash is known, from the last status
			added, removed = catalog.Diff(c.names, names)
		}
	}
	c.cur, c.hash, c.names, c.saved = next, hash, names, false
	c.status = &spec.CatalogStatus{Hash: hash, ChangedTime: &changed, Added: capNames(added), Removed: capNames(removed)}
	return moved, added, removed
}

// load takes in a catalog saved by an earlier run.
func (c *catalogState) load(saved *catalog.Catalog, log *slog.Logger) {
	c.cur, c.hash, c.names, c.saved = saved, saved.Hash(), saved.Names(), true
	c.status = &spec.CatalogStatus{Hash: c.hash}
	log.Debug("catalog loaded from the state directory", "items", len(c.names))
}

// resume carries on from the status an earlier run left: its catalog's
// hash (so a change across the restart is seen) and, for the same hash,
// when and how it last moved.
func (c *catalogState) resume(prev *spec.CatalogStatus) {
	if prev == nil {
		return
	}
	if c.hash == "" {
		c.hash = prev.Hash
	}
	if prev.Hash == c.hash {
		st := *prev
		c.status = &st
	}
}

func capNames(names []string) []string {
	if len(names) > maxCatalogNames {
		return names[:maxCatalogNames]
	}
	return names
}

// sliceID identifies a slice by its backing array and length: comparable,
// cheap, and different for every new list a session hands out.
func sliceID[T any](s []T) any {
	if len(s) == 0 {
		return [2]uintptr{}
	}
	return struct {
		p *T
		n int
	}{&s[0], len(s)}
}
