package controller

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/catalog"
)

// failingCatalogs is a CatalogStore whose saves fail with err.
type failingCatalogs struct {
	err   error
	saves atomic.Int32
}

func (f *failingCatalogs) LoadCatalog(string) (*catalog.Catalog, error) { return nil, nil }
func (f *failingCatalogs) DeleteCatalog(string) error                   { return nil }
func (f *failingCatalogs) SaveCatalog(string, *catalog.Catalog) error {
	f.saves.Add(1)
	return f.err
}

// An OnDemand server's catalog too large to save (catalog.TooLargeError)
// is tried once, one WARN, until it changes; a save that failed otherwise
// is tried again at the next reconcile.
func TestCatalogTooLargeToSaveIsTriedOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		again int32 // saves tried by two more reconciles
	}{
		{"too large", fmt.Errorf("state: not saving the catalog of one: %w", &catalog.TooLargeError{Size: 2, Limit: 1}), 0},
		{"other failure", errors.New("disk full"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &failingCatalogs{err: tc.err}
			h := newHarnessWith(t, func(o *ReconcilerOptions) { o.Catalogs = store })
			sess := newFakeSession("a")
			h.conn.push(sess)
			h.apply("one.yaml", manifestYAML("one", onDemandExtra))
			connectOnce(h, "one.yaml", "one")
			first := store.saves.Load()
			if first == 0 {
				t.Fatal("the catalog of the connected server was never saved")
			}
			h.reconcile("one")
			h.reconcile("one")
			if got := store.saves.Load() - first; got != tc.again {
				t.Errorf("two more reconciles tried %d saves, want %d", got, tc.again)
			}
			// The catalog changes (smaller, say): saved at the next
			// reconcile, and then no more.
			store.err = nil
			sess.tools = []*mcp.Tool{{Name: "a"}, {Name: "b"}}
			before := store.saves.Load()
			h.reconcile("one")
			h.reconcile("one")
			if got := store.saves.Load() - before; got != 1 {
				t.Errorf("after the catalog changed, two reconciles tried %d saves, want 1", got)
			}
		})
	}
}
