package manifest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-mcp/tether/controller/desired"

	"github.com/tether-mcp/tether/spec"
)

func parsed(path, content string) File {
	return File{Path: path, Docs: decode(path, content)}
}

// rules applies Resolve to a store, as the Source does after a listing.
type rules struct {
	*desired.Store
	problems Problems
}

func newRules() *rules { return &rules{Store: desired.NewStore()} }

func (r *rules) Replace(files []File) []string {
	next, problems, _ := Resolve(r.Entries(), files)
	r.problems = problems
	return r.Store.Replace(next)
}

func (r *rules) FileErrors() Problems { return r.problems }

func manifest(name, extra string) string {
	return `apiVersion: tether.dev/v1alpha1
kind: McpConnection
metadata:
  name: ` + name + `
spec:
  stdio:
    command: server
` + extra
}

func TestDesiredStateRules(t *testing.T) {
	d := newRules()
	a := manifest("a", "")
	b := manifest("b", "")

	// Two files, three names, one declared twice: the first file in path
	// order wins, the other file gets an error naming it.
	changed := d.Replace([]File{
		parsed("x/one.yaml", a+"---\n"+b),
		parsed("x/two.yaml", a),
	})
	if want := []string{"a", "b"}; !reflect.DeepEqual(changed, want) {
		t.Fatalf("changed = %v, want %v", changed, want)
	}
	if e, _ := d.Get("a"); e.Origin != "x/one.yaml" || e.Conn == nil {
		t.Fatalf("a = %+v", e)
	}
	errs := d.FileErrors()["x/two.yaml"]
	if len(errs) != 1 || !strings.Contains(errs[0], `"a" is already declared in x/one.yaml`) {
		t.Fatalf("duplicate error = %v", errs)
	}
	if got := d.At("x/one.yaml"); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("order = %v", got)
	}

	// The earlier owner keeps the name even when it would sort later.
	d2 := newRules()
	d2.Replace([]File{parsed("z.yaml", a)})
	d2.Replace([]File{parsed("a.yaml", a), parsed("z.yaml", a)})
	if e, _ := d2.Get("a"); e.Origin != "z.yaml" {
		t.Errorf("owner moved to %s; the earlier file must keep it", e.Origin)
	}

	// Nothing changed: nothing reported.
	if changed := d.Replace([]File{parsed("x/one.yaml", a+"---\n"+b), parsed("x/two.yaml", a)}); len(changed) != 0 {
		t.Errorf("unchanged listing reported %v", changed)
	}

	// A syntax error in the file keeps both last valid specs, with the error.
	before, _ := d.Get("a")
	changed = d.Replace([]File{
		parsed("x/one.yaml", "apiVersion: [unclosed\n"),
		parsed("x/two.yaml", a),
	})
	if want := []string{"a", "b"}; !reflect.DeepEqual(changed, want) {
		t.Errorf("changed after a syntax error = %v, want %v (both now carry the error)", changed, want)
	}
	for _, n := range []string{"a", "b"} {
		e, ok := d.Get(n)
		if !ok || e.Conn == nil || e.ManifestError == "" {
			t.Errorf("%s after a syntax error: %+v (ok=%v)", n, e, ok)
		}
	}
	if e, _ := d.Get("a"); e.Conn != before.Conn {
		t.Error("the last valid spec was replaced")
	}

	// Removing a document removes only that name.
	d.Replace([]File{parsed("x/one.yaml", a), parsed("x/two.yaml", a)})
	if _, ok := d.Get("b"); ok {
		t.Error("b survived the removal of its document")
	}
	// Removing the owner file hands the name to the other declaration.
	d.Replace([]File{parsed("x/two.yaml", a)})
	if e, _ := d.Get("a"); e.Origin != "x/two.yaml" || len(d.FileErrors()) != 0 {
		t.Errorf("after the owner left: %+v, errors %v", e, d.FileErrors())
	}
	// An unreadable file keeps its names.
	d.Replace([]File{{Path: "x/two.yaml", Err: os.ErrPermission}})
	if e, ok := d.Get("a"); !ok || e.ManifestError == "" {
		t.Errorf("unreadable file: %+v ok=%v", e, ok)
	}
	// A removed file removes its names.
	d.Replace(nil)
	if n := d.Names(); len(n) != 0 {
		t.Errorf("names after removing everything: %v", n)
	}
}

// TestSourceWatchesTree drives the real watcher: new files, new
// subdirectories, and a removed and recreated directory.
func TestSourceWatchesTree(t *testing.T) {
	root := t.TempDir()
	d := desired.NewStore()
	var mu sync.Mutex
	seen := map[string]int{}
	src := NewSource(SourceOptions{
		Root:     root,
		Debounce: 20 * time.Millisecond,
		OnChange: func(names []string) {
			mu.Lock()
			defer mu.Unlock()
			for _, n := range names {
				seen[n]++
			}
		},
	}, d)
	runSource(t, src)

	waitFor := func(what string, ok func() bool) { t.Helper(); waitDesired(t, d, what, ok) }
	has := func(n string) func() bool { return func() bool { _, ok := d.Get(n); return ok } }
	gone := func(n string) func() bool { return func() bool { _, ok := d.Get(n); return !ok } }

	write := func(p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "a.yaml"), manifest("a", ""))
	waitFor("a", has("a"))

	// A subdirectory that appears after start, with a file in it at once.
	write(filepath.Join(root, "sub", "deep", "b.yaml"), manifest("b", ""))
	waitFor("b", has("b"))
	// ...and a later file in it, which needs the new directory's watch.
	write(filepath.Join(root, "sub", "deep", "c.yaml"), manifest("c", ""))
	waitFor("c", has("c"))

	// Remove and recreate the directory.
	if err := os.RemoveAll(filepath.Join(root, "sub")); err != nil {
		t.Fatal(err)
	}
	waitFor("b and c removed", func() bool { return gone("b")() && gone("c")() })
	write(filepath.Join(root, "sub", "b.yaml"), manifest("b", ""))
	waitFor("b again", has("b"))
	write(filepath.Join(root, "sub", "d.yaml"), manifest("d", ""))
	waitFor("d", has("d"))

	// Status files never trigger anything.
	mu.Lock()
	before := seen["a"]
	mu.Unlock()
	write(filepath.Join(root, "a.status.yaml"), "status: {}\n")
	write(filepath.Join(root, "x.yaml"), manifest("x", ""))
	waitFor("x", has("x"))
	mu.Lock()
	after := seen["a"]
	mu.Unlock()
	if after != before {
		t.Errorf("a was reported changed %d more times by unrelated writes", after-before)
	}
}

func decode(path, content string) []spec.Document {
	return spec.DecodeFile(path, []byte(content))
}

// TestSourceKeepsUnreadableDirectories: a directory of the tree that cannot
// be read (a root-owned lost+found, a chmod 000) keeps the connections it
// declared, with an error; it does not make the tree look empty. Permission
// bits mean nothing to root, so the test needs another user.
func TestSourceKeepsUnreadableDirectories(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("permission bits do not stop root; the end-to-end fault tests run this as nobody")
	}
	root := t.TempDir()
	sub := filepath.Join(root, "team")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, name := range map[string]string{filepath.Join(root, "a.yaml"): "a", filepath.Join(sub, "b.yaml"): "b"} {
		if err := os.WriteFile(p, []byte(manifest(name, "")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := desired.NewStore()
	src := NewSource(SourceOptions{Root: root}, d)
	if err := src.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sub, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(sub, 0o755) })
	if err := src.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		if _, ok := d.Get(n); !ok {
			t.Errorf("%s is gone after a directory became unreadable", n)
		}
	}
	if e, _ := d.Get("b"); e.Conn == nil || !strings.Contains(e.ManifestError, "cannot be read") {
		t.Errorf("b = %+v, want its last spec with the error", e)
	}
}

// TestSourceStatusFileClash: x.yaml and x.yml in one directory would share
// x.status.yaml; the second is reported and declares nothing.
func TestSourceStatusFileClash(t *testing.T) {
	root := t.TempDir()
	for p, name := range map[string]string{"x.yaml": "first", "x.yml": "second"} {
		if err := os.WriteFile(filepath.Join(root, p), []byte(manifest(name, "")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := desired.NewStore()
	src := NewSource(SourceOptions{Root: root}, d)
	if err := src.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Get("first"); !ok {
		t.Error("x.yaml's connection is missing")
	}
	if _, ok := d.Get("second"); ok {
		t.Error("x.yml declared a connection whose status would overwrite x.yaml's")
	}
	errs := src.problems[filepath.Join(root, "x.yml")]
	if len(errs) != 1 || !strings.Contains(errs[0], "x.status.yaml would be x.yaml's too") {
		t.Errorf("errors of x.yml = %v", errs)
	}
}

// A file created in a new directory after the directory was listed and
// before its watch was added is seen by neither the listing nor an event:
// the source must list again once the watch is in place.
func TestSourceSeesFileCreatedBeforeWatch(t *testing.T) {
	root := t.TempDir()
	d := desired.NewStore()
	src := NewSource(SourceOptions{Root: root, Debounce: 10 * time.Millisecond, Resync: time.Hour}, d)
	deep := filepath.Join(root, "sub", "deep")
	late := filepath.Join(deep, "late.yaml")
	var wrote atomic.Bool
	src.afterList = func(dirs []string) {
		// Runs on the source's goroutine, in the window between a listing
		// that found the new directory and the watch on it.
		if slices.Contains(dirs, deep) && !wrote.Swap(true) {
			if err := os.WriteFile(late, []byte(manifest("late", "")), 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	runSource(t, src)

	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "b.yaml"), []byte(manifest("b", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitDesired(t, d, "b, and late (written between the listing and the watch)", func() bool {
		_, okB := d.Get("b")
		_, okLate := d.Get("late")
		return okB && okLate
	})
}

// BenchmarkSourceSyncUnchanged measures a re-listing of 1,000 manifests
// that did not change: the cost of the extra pass relist makes after it
// adds watches (at start, and when directories appear).
func BenchmarkSourceSyncUnchanged(b *testing.B) {
	root := b.TempDir()
	for i := range 1000 {
		name := fmt.Sprintf("c%04d", i)
		if err := os.WriteFile(filepath.Join(root, name+".yaml"), []byte(manifest(name, "")), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	src := NewSource(SourceOptions{Root: root}, desired.NewStore())
	if err := src.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := src.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// A directory deleted and made again at once often gets the same inode
// number; its new watch must still be added, or files written into it are
// missed until the resync.
func TestSourceWatchesRecreatedDirectory(t *testing.T) {
	root := t.TempDir()
	d := desired.NewStore()
	src := NewSource(SourceOptions{Root: root, Debounce: 20 * time.Millisecond, Resync: time.Hour}, d)
	runSource(t, src)
	waitName := func(name string, want bool) {
		t.Helper()
		waitDesired(t, d, fmt.Sprintf("%s present: %v", name, want), func() bool { _, ok := d.Get(name); return ok == want })
	}
	sub := filepath.Join(root, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "a.yaml"), []byte(manifest("a", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitName("a", true)
	before, _ := dirID(sub)

	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	after, _ := dirID(sub)
	t.Logf("same inode number after recreation: %v", before == after)
	waitName("a", false) // a listing ran after the recreation
	if err := os.WriteFile(filepath.Join(sub, "b.yaml"), []byte(manifest("b", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitName("b", true)
}

// runSource runs src until the test ends.
func runSource(t *testing.T, src *Source) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, nil, nil) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitDesired waits up to 10 s until ok accepts d.
func waitDesired(t *testing.T, d *desired.Store, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; names %v", what, d.Names())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSourceRejectsSecretKeyRef: a manifest tree has no Secrets, so a
// document that reads one is invalid there, with an error naming the field;
// its other documents are unaffected.
func TestSourceRejectsSecretKeyRef(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.yaml")
	content := manifest("plain", "") + "---\n" + manifest("secret", `    env:
      - {name: A, value: x}
      - name: TOKEN
        valueFrom: {secretKeyRef: {name: github, key: token}}
`)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	store := desired.NewStore()
	if err := NewSource(SourceOptions{Root: dir}, store).Sync(); err != nil {
		t.Fatal(err)
	}
	if e, ok := store.Get("plain"); !ok || e.Conn == nil || e.ManifestError != "" {
		t.Errorf("plain = %+v (ok=%v)", e, ok)
	}
	e, ok := store.Get("secret")
	want := path + ":8: document 2 (line 8): spec.stdio.env[1].valueFrom.secretKeyRef: a Secret can be read only in Kubernetes mode (tether run --kubernetes); in a manifest directory use valueFrom.file"
	if !ok || e.Conn != nil || e.ManifestError != want {
		t.Errorf("secret = %+v (ok=%v)\nwant manifestError %s", e, ok, want)
	}

	// A container's env and secret files are held to it too.
	boxed := "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: boxed\nspec:\n  container:\n    image: srv:1\n" +
		"    env: [{name: A, value: x}]\n" +
		"    secretFiles: [{name: t, valueFrom: {secretKeyRef: {name: github, key: token}}}]\n"
	if err := os.WriteFile(path, []byte(boxed), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := NewSource(SourceOptions{Root: dir}, store).Sync(); err != nil {
		t.Fatal(err)
	}
	e, ok = store.Get("boxed")
	want = path + ":1: document 1 (line 1): spec.container.secretFiles[0].valueFrom.secretKeyRef: a Secret can be read only in Kubernetes mode (tether run --kubernetes); in a manifest directory use valueFrom.file"
	if !ok || e.Conn != nil || e.ManifestError != want {
		t.Errorf("boxed = %+v (ok=%v)\nwant manifestError %s", e, ok, want)
	}
}
