package manifest

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fsnotify/fsnotify"

	"github.com/tether-mcp/tether/controller/desired"
)

func newWatcher(t *testing.T) *fsnotify.Watcher {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// TestRelistReportsRoot: relist says whether the root could be listed,
// and warns only when it could not, saying whether it is gone or unreadable.
func TestRelistReportsRoot(t *testing.T) {
	for _, tc := range []struct {
		name     string
		make     func(root string) error
		wantOK   bool
		wantWarn string
	}{
		{"a directory", func(root string) error { return os.Mkdir(root, 0o755) }, true, ""},
		{"gone", func(string) error { return nil }, false, "the manifest directory is gone"},
		{"not a directory", func(root string) error { return os.WriteFile(root, nil, 0o644) }, false, "cannot list the manifest directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "m")
			if err := tc.make(root); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			src := NewSource(SourceOptions{Root: root, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, desired.NewStore())
			rootOK, _ := src.relist(newWatcher(t))
			if rootOK != tc.wantOK {
				t.Errorf("rootOK = %v, want %v", rootOK, tc.wantOK)
			}
			if tc.wantWarn == "" {
				if logs.Len() != 0 {
					t.Errorf("logged for a good root:\n%s", logs.String())
				}
			} else if !strings.Contains(logs.String(), tc.wantWarn) || strings.Count(logs.String(), "level=WARN") != 1 {
				t.Errorf("logs = %q, want one warning %q", logs.String(), tc.wantWarn)
			}
		})
	}
}

// TestRelistPasses: relist lists again after it adds a watch, so a file
// made in a new directory before its watch is not missed; a stable tree
// needs one more pass, and a tree that keeps growing is cut off after
// maxRelistPasses and reported as growing.
func TestRelistPasses(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := NewSource(SourceOptions{Root: root}, desired.NewStore())
	w := newWatcher(t)
	passes := 0
	src.afterList = func([]string) { passes++ }

	if _, growing := src.relist(w); passes != 2 || growing {
		t.Errorf("first relist: %d passes, growing %v; want 2 (the second finds no new directory), false", passes, growing)
	}
	want := []string{root, filepath.Join(root, "sub")}
	if got := watchedDirs(src); !reflect.DeepEqual(got, want) {
		t.Errorf("watched = %v, want %v", got, want)
	}

	passes = 0
	if _, growing := src.relist(w); passes != 1 || growing {
		t.Errorf("unchanged tree: %d passes, growing %v; want 1, false", passes, growing)
	}

	// Every listing finds a new directory: relist stops after
	// maxRelistPasses and says the tree is still growing.
	if err := os.Mkdir(filepath.Join(root, "new0"), 0o755); err != nil {
		t.Fatal(err)
	}
	passes = 0
	src.afterList = func([]string) {
		passes++
		if passes > maxRelistPasses {
			t.Errorf("pass %d: more than maxRelistPasses (%d)", passes, maxRelistPasses)
		}
		if passes < 2*maxRelistPasses { // stop growing, so that a broken bound ends too
			if err := os.Mkdir(filepath.Join(root, fmt.Sprintf("new%d", passes)), 0o755); err != nil {
				t.Error(err)
			}
		}
	}
	if _, growing := src.relist(w); passes != maxRelistPasses || !growing {
		t.Errorf("growing tree: %d passes, growing %v; want %d, true", passes, growing, maxRelistPasses)
	}
}

func watchedDirs(s *Source) []string {
	var dirs []string
	for d := range s.watched {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return dirs
}

// TestWatchFollowsDirectory: a watch is added once per directory; when its
// path names another directory (a link or directory swapped), it is moved;
// a directory that cannot be watched is logged and left out.
func TestWatchFollowsDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	src := NewSource(SourceOptions{Root: root, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, desired.NewStore())
	w := newWatcher(t)
	if !src.watch(w, []string{dir}) {
		t.Error("a new directory's watch was not added")
	}
	if src.watch(w, []string{dir}) {
		t.Error("a watched directory was added again")
	}
	// Another directory at the same path; the old one still exists, so
	// the new one has another inode.
	if err := os.Rename(dir, filepath.Join(root, "old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if !src.watch(w, []string{dir}) {
		t.Error("the watch did not move to the directory the path names now")
	}
	if got := w.WatchList(); !reflect.DeepEqual(got, []string{dir}) {
		t.Errorf("fsnotify watches %v, want %v", got, []string{dir})
	}

	missing := filepath.Join(root, "missing")
	if src.watch(w, []string{missing}) {
		t.Error("watch reported a directory it could not watch as added")
	}
	if !strings.Contains(logs.String(), "cannot watch directory") || !strings.Contains(logs.String(), "dir="+missing) {
		t.Errorf("logs = %q, want a warning naming %s", logs.String(), missing)
	}
	if got := watchedDirs(src); len(got) != 0 {
		t.Errorf("watched = %v after the listing dropped every directory, want none", got)
	}
	if got := w.WatchList(); len(got) != 0 {
		t.Errorf("fsnotify still watches %v", got)
	}
}

// TestLinkParents: the directory holding a symlink on the way to the root
// is watched too; a path without symlinks adds nothing.
func TestLinkParents(t *testing.T) {
	tmp := t.TempDir()
	base := linkParents(tmp) // whatever the temp directory's own path holds
	real := filepath.Join(tmp, "real", "m")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(tmp, "link")); err != nil {
		t.Fatal(err)
	}
	if got := linkParents(real); !reflect.DeepEqual(got, base) {
		t.Errorf("linkParents(%s) = %v, want %v", real, got, base)
	}
	want := append([]string{tmp}, base...)
	if got := linkParents(filepath.Join(tmp, "link", "m")); !reflect.DeepEqual(got, want) {
		t.Errorf("linkParents(through a link) = %v, want %v", got, want)
	}
}
