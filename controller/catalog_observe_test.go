package controller

import (
	"slices"
	"testing"
	"time"
)

// TestCatalogObserveHashesWhatTheListHolds: a new list from the session is
// hashed from what its definitions hold now, not from what the same
// definition (the same pointer) held when an earlier list was hashed: a
// hash remembered by identity would hide a changed catalog, and hashes
// persist in status files.
func TestCatalogObserveHashesWhatTheListHolds(t *testing.T) {
	ss := newFakeSession("echo", "add")
	var c catalogState
	now := time.Unix(1_700_000_000, 0)
	c.observe(ss, now)
	first := c.hash

	// The same definitions in a new list, one of them changed.
	ss.tools = slices.Clone(ss.tools)
	ss.tools[0].Description = "echoes, louder"
	moved, added, removed := c.observe(ss, now)
	if !moved || c.hash == first {
		t.Fatalf("moved %v, hash %s (was %s): a changed definition went unseen", moved, c.hash, first)
	}
	if len(added) != 0 || len(removed) != 0 {
		t.Errorf("added %v, removed %v: the names did not change", added, removed)
	}
}
