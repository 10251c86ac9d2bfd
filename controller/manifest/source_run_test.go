package manifest

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tether-mcp/tether/controller/desired"
)

// TestRunFirstListing: Run lists a flat tree once, calls OnSynced, then
// synced, then tells the first listing's changes to Run's changed (which
// replaces OnChange); a first listing that changed nothing tells nothing.
func TestRunFirstListing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		want  []string
	}{
		{"one manifest", []string{"a"}, []string{"OnSynced", "synced", "changed a"}},
		{"empty tree", nil, []string{"OnSynced", "synced"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, n := range tc.files {
				if err := os.WriteFile(filepath.Join(root, n+".yaml"), []byte(manifest(n, "")), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var events []string
			listings := 0
			src := NewSource(SourceOptions{
				Root:     root,
				Resync:   time.Hour,
				OnChange: func([]string) { events = append(events, "OnChange") },
				OnSynced: func(map[string]bool) { events = append(events, "OnSynced") },
			}, desired.NewStore())
			src.afterList = func([]string) { listings++ }
			// Cancelled before it starts, Run still makes and tells its first
			// listing, and then returns: events holds all it told.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			changed := func(names []string) { events = append(events, "changed "+strings.Join(names, " ")) }
			synced := func() { events = append(events, "synced") }
			if err := src.Run(ctx, changed, synced); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(events, tc.want) {
				t.Errorf("events = %q, want %q", events, tc.want)
			}
			if listings != 1 {
				t.Errorf("the first listing of a flat tree took %d passes, want 1 (the root is watched before it)", listings)
			}
		})
	}
}

// eventLastValid is a LastValidStore that records its saves in events.
type eventLastValid struct {
	mu     sync.Mutex
	events *[]string
	loaded map[string]desired.Entry // what LoadSpecs finds
}

func (l *eventLastValid) LoadSpecs() (map[string]desired.Entry, []error) {
	return maps.Clone(l.loaded), nil
}

func (l *eventLastValid) SaveSpec(e desired.Entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.events = append(*l.events, "SaveSpec "+e.Name)
	return nil
}

func (l *eventLastValid) DeleteSpec(name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.events = append(*l.events, "DeleteSpec "+name)
	return nil
}

func (l *eventLastValid) seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(*l.events)
}

// TestRunSavesLastValidAfterTelling: the last valid specs of a listing are
// saved after its changes are told, so that no reconcile waits for a file
// per connection to be created (at 1,000 connections, up to a second on a
// loaded machine): the first listing's after the changes it held back,
// and every later listing's too.
func TestRunSavesLastValidAfterTelling(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.yaml"), []byte(manifest("a", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	var events []string
	store := &eventLastValid{events: &events}
	changed := func(names []string) {
		store.mu.Lock()
		defer store.mu.Unlock()
		events = append(events, "changed "+strings.Join(names, " "))
	}
	src := NewSource(SourceOptions{
		Root:      root,
		Resync:    time.Hour,
		Debounce:  time.Millisecond,
		LastValid: store,
		OnSynced: func(map[string]bool) {
			store.mu.Lock()
			defer store.mu.Unlock()
			events = append(events, "OnSynced")
		},
	}, desired.NewStore())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, changed, nil) }()
	t.Cleanup(func() { cancel(); <-done })

	want := []string{"OnSynced", "changed a", "SaveSpec a"}
	waitDesired(t, src.desired, "a saved", func() bool { return len(store.seen()) >= len(want) })
	if err := os.WriteFile(filepath.Join(root, "b.yaml"), []byte(manifest("b", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	want = append(want, "changed b", "SaveSpec b")
	waitDesired(t, src.desired, "b saved", func() bool { return len(store.seen()) >= len(want) })
	if got := store.seen(); !reflect.DeepEqual(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}

// TestRunResyncTellsEveryName: a resync re-lists and tells every name,
// changed or not.
func TestRunResyncTellsEveryName(t *testing.T) {
	root := t.TempDir()
	for _, n := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(root, n+".yaml"), []byte(manifest(n, "")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var calls [][]string
	d := desired.NewStore()
	src := NewSource(SourceOptions{Root: root, Resync: 10 * time.Millisecond, OnChange: func(names []string) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, slices.Sorted(slices.Values(names)))
	}}, d)
	runSource(t, src)
	waitDesired(t, d, "two calls: the first listing and a resync", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	for i, c := range calls[:2] {
		if want := []string{"a", "b"}; !reflect.DeepEqual(c, want) {
			t.Errorf("call %d = %v, want %v", i, c, want)
		}
	}
}

// TestRunFindsRecreatedRoot: a removed root has no watch left; Run polls
// for it and lists it again once it is back.
func TestRunFindsRecreatedRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "m")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a.yaml"), []byte(manifest("a", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	d := desired.NewStore()
	src := NewSource(SourceOptions{Root: root, Debounce: 10 * time.Millisecond, Resync: time.Hour}, d)
	runSource(t, src)
	waitDesired(t, d, "a", func() bool { _, ok := d.Get("a"); return ok })
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	waitDesired(t, d, "a removed with the root", func() bool { _, ok := d.Get("a"); return !ok })
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "b.yaml"), []byte(manifest("b", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitDesired(t, d, "b in the recreated root", func() bool { _, ok := d.Get("b"); return ok })
}

// TestRunSaveAfter: with SaveAfter, no last valid spec of a name not saved
// yet is saved until it is closed, while listings go on; then the last
// listing's specs are saved. A run that ends while they are held back saves
// them as it returns. A spec that replaces a saved one, and a name gone,
// are saved at once: a tether killed before SaveAfter leaves no older spec
// for a manifest broken before the next start to fall back to.
func TestRunSaveAfter(t *testing.T) {
	setup := func(t *testing.T, saveAfter chan struct{}) (*Source, *eventLastValid, string) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "a.yaml"), []byte(manifest("a", "")), 0o644); err != nil {
			t.Fatal(err)
		}
		var events []string
		store := &eventLastValid{events: &events}
		src := NewSource(SourceOptions{
			Root: root, Resync: time.Hour, Debounce: time.Millisecond,
			LastValid: store, SaveAfter: saveAfter,
			OnChange: func(names []string) {
				store.mu.Lock()
				defer store.mu.Unlock()
				events = append(events, "changed "+strings.Join(names, " "))
			},
		}, desired.NewStore())
		return src, store, root
	}
	saves := func(events []string) []string {
		var out []string
		for _, e := range events {
			if strings.HasPrefix(e, "SaveSpec") {
				out = append(out, e)
			}
		}
		slices.Sort(out)
		return out
	}

	t.Run("held until closed", func(t *testing.T) {
		hold := make(chan struct{})
		src, store, root := setup(t, hold)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- src.Run(ctx, nil, nil) }()
		t.Cleanup(func() { cancel(); <-done })
		waitDesired(t, src.desired, "a told", func() bool { return slices.Contains(store.seen(), "changed a") })
		if err := os.WriteFile(filepath.Join(root, "b.yaml"), []byte(manifest("b", "")), 0o644); err != nil {
			t.Fatal(err)
		}
		waitDesired(t, src.desired, "b told", func() bool { return slices.Contains(store.seen(), "changed b") })
		if got := saves(store.seen()); got != nil {
			t.Fatalf("saved %q while SaveAfter was open", got)
		}
		close(hold)
		waitDesired(t, src.desired, "a and b saved", func() bool { return len(saves(store.seen())) >= 2 })
		if got, want := saves(store.seen()), []string{"SaveSpec a", "SaveSpec b"}; !reflect.DeepEqual(got, want) {
			t.Errorf("saves = %q, want %q", got, want)
		}
	})
	t.Run("replaced and gone at once", func(t *testing.T) {
		// What a previous run saved: a with other args, same as it is
		// now, gone no longer declared.
		prev := newSyncTree(t, SourceOptions{})
		prev.write("a.yaml", manifest("a", "    args: [old]\n"))
		prev.write("same.yaml", manifest("same", ""))
		prev.write("gone.yaml", manifest("gone", ""))
		prev.sync()
		hold := make(chan struct{})
		src, store, root := setup(t, hold)
		store.loaded = map[string]desired.Entry{}
		for _, name := range []string{"a", "same", "gone"} {
			e, _ := prev.store.Get(name)
			e.Origin = filepath.Join(root, name+".yaml")
			store.loaded[name] = e
		}
		for _, name := range []string{"same", "new"} {
			if err := os.WriteFile(filepath.Join(root, name+".yaml"), []byte(manifest(name, "")), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- src.Run(ctx, nil, nil) }()
		t.Cleanup(func() { cancel(); <-done })
		waitDesired(t, src.desired, "a saved, gone forgotten", func() bool {
			return slices.Contains(store.seen(), "SaveSpec a") && slices.Contains(store.seen(), "DeleteSpec gone")
		})
		if got, want := saves(store.seen()), []string{"SaveSpec a"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("saves while SaveAfter was open = %q, want %q (new waits, same is saved already)", got, want)
		}
		close(hold)
		waitDesired(t, src.desired, "new saved", func() bool { return slices.Contains(store.seen(), "SaveSpec new") })
		if got, want := saves(store.seen()), []string{"SaveSpec a", "SaveSpec new"}; !reflect.DeepEqual(got, want) {
			t.Errorf("saves = %q, want %q", got, want)
		}
	})
	t.Run("saved when the run ends", func(t *testing.T) {
		src, store, _ := setup(t, make(chan struct{}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- src.Run(ctx, nil, nil) }()
		waitDesired(t, src.desired, "a told", func() bool { return slices.Contains(store.seen(), "changed a") })
		if got := saves(store.seen()); got != nil {
			t.Fatalf("saved %q while SaveAfter was open", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got, want := saves(store.seen()), []string{"SaveSpec a"}; !reflect.DeepEqual(got, want) {
			t.Errorf("saves after Run returned = %q, want %q", got, want)
		}
	})
}

// TestRunDirs: Dirs is nil before the first listing (and for no Source),
// then the directories that listing read manifests from, symlinked ones'
// targets among them (controller/connection protects them from sandbox
// and container writes).
func TestRunDirs(t *testing.T) {
	if d := (*Source)(nil).Dirs(); d != nil {
		t.Errorf("a nil Source's Dirs = %q", d)
	}
	root, outside := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "team"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "linked")); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	src := NewSource(SourceOptions{Root: root, Resync: time.Hour}, desired.NewStore())
	if d := src.Dirs(); d != nil {
		t.Errorf("Dirs before the first listing = %q", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run still makes its first listing
	if err := src.Run(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	got := src.Dirs()
	for _, want := range []string{root, filepath.Join(root, "team"), outside} {
		found := false
		for _, d := range got {
			if a, b := evalOrSelf(d), evalOrSelf(want); a == b {
				found = true
			}
		}
		if !found {
			t.Errorf("Dirs = %q, want %s among them", got, want)
		}
	}
}

func evalOrSelf(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
