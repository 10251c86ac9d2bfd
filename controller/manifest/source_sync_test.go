package manifest

import (
	"bytes"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/controller/desired"
)

// syncTree is a manifest tree driven by Sync, with what its source tells.
type syncTree struct {
	t       *testing.T
	root    string
	store   *desired.Store
	src     *Source
	logs    bytes.Buffer
	changed [][]string
	counts  map[string][]int // ManifestErrors calls, by file
}

func newSyncTree(t *testing.T, opts SourceOptions) *syncTree {
	st := &syncTree{t: t, root: t.TempDir(), store: desired.NewStore(), counts: map[string][]int{}}
	opts.Root = st.root
	opts.Logger = slog.New(slog.NewTextHandler(&st.logs, nil))
	opts.OnChange = func(names []string) { st.changed = append(st.changed, slices.Sorted(slices.Values(names))) }
	opts.ManifestErrors = func(file string, n int) { st.counts[file] = append(st.counts[file], n) }
	st.src = NewSource(opts, st.store)
	return st
}

func (st *syncTree) write(name, content string) string {
	st.t.Helper()
	p := filepath.Join(st.root, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		st.t.Fatal(err)
	}
	return p
}

func (st *syncTree) sync() {
	st.t.Helper()
	if err := st.src.Sync(); err != nil {
		st.t.Fatal(err)
	}
}

// TestSyncTellsOnlyChanges: OnChange hears of a listing that changed
// names, not of one that changed nothing.
func TestSyncTellsOnlyChanges(t *testing.T) {
	st := newSyncTree(t, SourceOptions{})
	st.write("a.yaml", manifest("a", ""))
	st.sync()
	st.sync()
	st.write("b.yaml", manifest("b", ""))
	st.sync()
	if want := [][]string{{"a"}, {"b"}}; !reflect.DeepEqual(st.changed, want) {
		t.Errorf("OnChange calls = %v, want %v", st.changed, want)
	}
}

// TestSyncReportsFileErrorsOnce: an invalid manifest is logged and counted
// once while it stays the same, again when its problems change, and said
// valid again (count 0) once fixed; a removed file's count goes to 0
// without a "valid again".
func TestSyncReportsFileErrorsOnce(t *testing.T) {
	st := newSyncTree(t, SourceOptions{})
	bad := st.write("a.yaml", manifest("a", "  helthCheck: {}\n"))
	st.sync()
	st.sync()
	if n := strings.Count(st.logs.String(), "invalid manifest"); n != 1 {
		t.Errorf("an unchanged invalid file was logged %d times, want once:\n%s", n, st.logs.String())
	}
	st.write("a.yaml", manifest("a", "  helthCheck: {}\n  retrys: 1\n"))
	st.sync()
	if n := strings.Count(st.logs.String(), "invalid manifest"); n != 3 {
		t.Errorf("after a second problem: %d lines, want 3 (one, then both):\n%s", n, st.logs.String())
	}
	st.write("a.yaml", manifest("a", ""))
	st.sync()
	if !strings.Contains(st.logs.String(), "manifest is valid again") {
		t.Errorf("the fix was not logged:\n%s", st.logs.String())
	}

	gone := st.write("b.yaml", manifest("b", "  helthCheck: {}\n"))
	st.sync()
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	st.sync()
	if n := strings.Count(st.logs.String(), "manifest is valid again"); n != 1 {
		t.Errorf("a removed file was said valid again:\n%s", st.logs.String())
	}
	want := map[string][]int{bad: {1, 2, 0}, gone: {1, 0}}
	if !reflect.DeepEqual(st.counts, want) {
		t.Errorf("ManifestErrors calls = %v, want %v", st.counts, want)
	}
}

// TestSyncSelector: a selector keeps the documents whose labels it
// accepts, and every document that cannot be decoded, so its error shows.
func TestSyncSelector(t *testing.T) {
	st := newSyncTree(t, SourceOptions{Selector: func(l map[string]string) bool { return l["team"] == "x" }})
	labelled := func(name, team string) string {
		return strings.Replace(manifest(name, ""), "  name: "+name+"\n", "  name: "+name+"\n  labels: {team: "+team+"}\n", 1)
	}
	st.write("m.yaml", labelled("mine", "x")+"---\n"+labelled("theirs", "y")+"---\n"+manifest("broken", "  helthCheck: {}\n"))
	st.sync()
	if got, want := st.store.Names(), []string{"broken", "mine"}; !reflect.DeepEqual(got, want) {
		t.Errorf("names = %v, want %v", got, want)
	}
}

// lastValid is a LastValidStore in memory.
type lastValid struct {
	specs          map[string]desired.Entry
	loadProblems   []error
	failSave       bool
	failDelete     bool
	saves, deletes []string
}

func (l *lastValid) LoadSpecs() (map[string]desired.Entry, []error) {
	return maps.Clone(l.specs), l.loadProblems
}

func (l *lastValid) SaveSpec(e desired.Entry) error {
	l.saves = append(l.saves, e.Name)
	if l.failSave {
		return errors.New("disk full")
	}
	l.specs[e.Name] = e
	return nil
}

func (l *lastValid) DeleteSpec(name string) error {
	l.deletes = append(l.deletes, name)
	if l.failDelete {
		return errors.New("read-only")
	}
	delete(l.specs, name)
	return nil
}

// TestSyncLastValid: the first listing starts from the saved specs, so a
// manifest invalid at start keeps its last valid spec; each valid spec is
// saved once, a name gone is forgotten, and a write that fails is logged
// and tried again at the next listing.
func TestSyncLastValid(t *testing.T) {
	// The spec a previous run saved for a.
	prev := newSyncTree(t, SourceOptions{})
	prev.write("a.yaml", manifest("a", ""))
	prev.sync()
	savedA, _ := prev.store.Get("a")

	store := &lastValid{specs: map[string]desired.Entry{}, loadProblems: []error{errors.New("c.yaml: corrupt")}}
	st := newSyncTree(t, SourceOptions{LastValid: store})
	savedA.Origin = filepath.Join(st.root, "a.yaml")
	store.specs["a"] = savedA
	st.write("a.yaml", manifest("a", "  helthCheck: {}\n"))
	st.write("b.yaml", manifest("b", ""))
	st.sync()
	if e, _ := st.store.Get("a"); e.Conn == nil || e.ManifestError == "" {
		t.Errorf("a, invalid at start: %+v; want its saved spec with the error", e)
	}
	if !strings.Contains(st.logs.String(), "a saved last valid spec cannot be used") {
		t.Errorf("a load problem was not logged:\n%s", st.logs.String())
	}
	if !reflect.DeepEqual(store.saves, []string{"b"}) {
		t.Errorf("saves = %v, want [b] (a's saved spec is the one kept)", store.saves)
	}

	st.sync()
	if len(store.saves) != 1 || len(store.deletes) != 0 {
		t.Errorf("an unchanged listing wrote: saves %v, deletes %v", store.saves, store.deletes)
	}

	// Writes that fail are tried again.
	store.failSave, store.failDelete = true, true
	if err := os.Remove(filepath.Join(st.root, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	st.write("c.yaml", manifest("c", ""))
	st.sync()
	st.sync()
	if want := []string{"b", "c", "c"}; !reflect.DeepEqual(store.saves, want) {
		t.Errorf("saves = %v, want %v", store.saves, want)
	}
	if want := []string{"b", "b"}; !reflect.DeepEqual(store.deletes, want) {
		t.Errorf("deletes = %v, want %v", store.deletes, want)
	}
	for _, msg := range []string{"cannot save the last valid spec", "cannot forget the last valid spec"} {
		if !strings.Contains(st.logs.String(), msg) {
			t.Errorf("%q was not logged:\n%s", msg, st.logs.String())
		}
	}
	store.failSave, store.failDelete = false, false
	st.sync()
	if _, ok := store.specs["b"]; ok {
		t.Error("b is still saved after its manifest went")
	}
	if _, ok := store.specs["c"]; !ok {
		t.Error("c is not saved")
	}
}
