package desired

import (
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/tether-mcp/tether/spec"
)

// Entry is the desired state of one connection.
type Entry struct {
	Name string
	// Origin says where the connection is declared: the manifest file, or
	// the namespace/name of its object. Index orders the entries of one
	// Origin (the document index in a manifest file).
	Origin string
	Index  int
	// Dir is the directory that relative paths of the spec (a command, a
	// valueFrom.file) resolve against; "" when there is none.
	Dir string
	// Generation is the object's metadata.generation in Kubernetes mode
	// (status.observedGeneration); 0 for a manifest file.
	Generation int64
	// SecretsVersion fingerprints the values of the Secrets the spec reads
	// (valueFrom.secretKeyRef, Kubernetes mode): a change reconnects, as a
	// spec change does. It is a hash, never a value; "" when none is read.
	SecretsVersion string
	// Conn is the last valid spec for this name; nil when it was never valid.
	Conn *spec.McpConnection
	// ManifestError is set while what is declared now for this name is
	// invalid (Conn then still holds the last valid spec, if any).
	ManifestError string
}

// Equal reports whether two entries hold the same desired state. Specs are
// compared by identity: a Source keeps an unchanged spec's pointer.
func (e *Entry) Equal(o *Entry) bool {
	if e == nil || o == nil {
		return e == o
	}
	return *e == *o
}

// Keep returns old when it holds the same spec as next (name, labels and
// spec hash), so that an unchanged spec keeps its pointer and Entry.Equal
// stays cheap; else next. Sources call it for every spec they read again.
func Keep(old, next *spec.McpConnection) *spec.McpConnection {
	if old == next {
		return old // the source reused the last decode
	}
	if old != nil && next != nil && old.Metadata.Name == next.Metadata.Name &&
		maps.Equal(old.Metadata.Labels, next.Metadata.Labels) && old.Spec.Hash() == next.Spec.Hash() {
		return old
	}
	return next
}

// Store holds the entries. One lock owns it; readers get copies.
type Store struct {
	mu      sync.RWMutex
	entries map[string]*Entry
	origins map[string][]string // origin → names in Index order
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{entries: map[string]*Entry{}, origins: map[string][]string{}}
}

// Get returns a copy of the entry for name.
func (s *Store) Get(name string) (Entry, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.entries[name]
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

// Names returns every connection name, sorted.
func (s *Store) Names() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.entries))
	for n := range s.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// At returns the names declared at origin, in Index order.
func (s *Store) At(origin string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.origins[origin])
}

// Entries returns a copy of every entry by name.
func (s *Store) Entries() map[string]Entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]Entry, len(s.entries))
	for n, e := range s.entries {
		out[n] = *e
	}
	return out
}

// Replace makes next the whole desired state and returns the names whose
// entry changed (added, changed or removed), sorted.
func (s *Store) Replace(next map[string]Entry) (changed []string) {
	entries := make(map[string]*Entry, len(next))
	for n, e := range next {
		entries[n] = &e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, e := range entries {
		if !e.Equal(s.entries[n]) {
			changed = append(changed, n)
		}
	}
	for n := range s.entries {
		if _, ok := entries[n]; !ok {
			changed = append(changed, n)
		}
	}
	sort.Strings(changed)
	s.entries = entries
	s.reindexLocked()
	return changed
}

// Put sets one entry and reports whether it changed.
func (s *Store) Put(e Entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Equal(s.entries[e.Name]) {
		return false
	}
	s.entries[e.Name] = &e
	s.reindexLocked()
	return true
}

// Delete removes name and reports whether it was there.
func (s *Store) Delete(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[name]; !ok {
		return false
	}
	delete(s.entries, name)
	s.reindexLocked()
	return true
}

func (s *Store) reindexLocked() {
	origins := make(map[string][]string, len(s.origins))
	for n, e := range s.entries {
		origins[e.Origin] = append(origins[e.Origin], n)
	}
	for o, names := range origins {
		sort.Slice(names, func(i, j int) bool {
			a, b := s.entries[names[i]], s.entries[names[j]]
			if a.Index != b.Index {
				return a.Index < b.Index
			}
			return a.Name < b.Name
		})
		origins[o] = names
	}
	s.origins = origins
}
