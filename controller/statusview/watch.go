package statusview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/controller/statusfile"
)

// WatchOptions tune Watch. Zero values take the defaults.
type WatchOptions struct {
	// Debounce is how long the files must stay quiet after an event before
	// they are read again (default 50ms): one status write is several
	// events (temp file created, written, renamed).
	Debounce time.Duration
	// Resync re-reads everything this often even without events (default
	// 5s), so that a directory that appears later (a --status-dir tether
	// has not created yet) or a missed event cannot hide a change for long.
	Resync time.Duration
	// Warn receives each warning of a reading once while it lasts, and each
	// error reading the tree; nil drops them.
	Warn func(string)
}

// Watch reads src, calls emit with every connection that sel chooses, then
// calls emit again with the connections whose status changed each time the
// status files (or manifests) change, until ctx ends or emit returns an
// error. A connection that appears counts as changed; one that disappears
// is dropped without a call. emit is never called with an empty slice after
// the first call, and always from the goroutine that called Watch.
//
// The status files' directories are watched with fsnotify. tether replaces
// a status file by renaming a temp file over it, so directories are
// watched, never files.
func Watch(ctx context.Context, src Source, sel Selection, opts WatchOptions, emit func([]Connection) error) error {
	if opts.Debounce <= 0 {
		opts.Debounce = 50 * time.Millisecond
	}
	if opts.Resync <= 0 {
		opts.Resync = 5 * time.Second
	}
	warn := opts.Warn
	if warn == nil {
		warn = func(string) {}
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", src.Dir, err)
	}
	defer w.Close()

	last := map[key]string{} // connection → fingerprint of what was emitted
	warned := map[string]bool{}
	first := true
	scan := func() error {
		snap, err := Load(src)
		// A directory watched for the first time may have changed between
		// the reading and the watch: read again once it is watched.
		// Bounded: a directory tree that keeps growing is caught up with by
		// the events of the directories watched already.
		for i := 0; i < 3 && err == nil && watchDirs(w, src, snap); i++ {
			snap, err = Load(src)
		}
		if err != nil {
			// The tree may be mid-swap (git checkout, a ConfigMap update):
			// say so and keep the last state; the next event or resync
			// reads it again.
			warn(err.Error())
			return nil
		}
		nowWarned := map[string]bool{}
		for _, msg := range snap.Warnings {
			if !warned[msg] {
				warn(msg)
			}
			nowWarned[msg] = true
		}
		warned = nowWarned
		conns, _ := Select(snap, sel, src.Dir)
		var changed []Connection
		seen := map[key]bool{}
		for _, c := range conns {
			k := key{c.Manifest, c.Name}
			seen[k] = true
			fp := fingerprint(&c)
			if last[k] != fp {
				last[k] = fp
				changed = append(changed, c)
			}
		}
		for k := range last {
			if !seen[k] {
				delete(last, k)
			}
		}
		if len(changed) == 0 && !first {
			return nil
		}
		first = false
		return emit(changed)
	}
	if err := scan(); err != nil {
		return err
	}

	// Quiet only: a status file is written in one short burst.
	deb := &manifest.Debouncer{Quiet: opts.Debounce}
	defer deb.Stop()
	resync := time.NewTicker(opts.Resync)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-w.Events:
			if !ok {
				return errors.New("file watcher closed")
			}
			deb.Kick()
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("file watcher closed")
			}
			// An overflow lost events: reading everything again makes up
			// for them, as for any other error of the watcher.
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				warn("watching: " + err.Error())
			}
			deb.Kick()
		case <-deb.C():
			deb.Done()
			if err := scan(); err != nil {
				return err
			}
		case <-resync.C:
			if err := scan(); err != nil {
				return err
			}
		}
	}
}

type key struct{ manifest, name string }

// fingerprint is what a change is measured on: the status document and
// what the row shows of the manifest.
func fingerprint(c *Connection) string {
	b, err := json.Marshal(struct {
		Status    any
		Observed  bool
		Transport string
		Endpoint  string
	}{c.Status, c.Observed, c.Transport(), c.Endpoint()})
	if err != nil {
		// Cannot happen for these types; a fresh value makes it a change.
		return fmt.Sprintf("unmarshalable %p", c)
	}
	return string(b)
}

// watchDirs adds every directory that holds a manifest or a status file,
// and reports whether it added one that was not watched before. A status
// directory that does not exist yet is covered by its nearest existing
// ancestor, so that its creation is an event. Directories that vanish drop
// out of the watch by themselves.
func watchDirs(w *fsnotify.Watcher, src Source, snap Snapshot) (added bool) {
	dirs := map[string]bool{}
	if tree, err := manifest.ListTree(src.Dir); err == nil {
		for _, d := range tree.Dirs {
			dirs[d] = true
		}
	}
	if src.StatusDir != "" {
		dirs[existingAncestor(filepath.Clean(src.StatusDir))] = true
		for _, c := range snap.Connections {
			dirs[existingAncestor(filepath.Dir(statusfile.Path(src.Dir, src.StatusDir, c.Manifest)))] = true
		}
	}
	watched := map[string]bool{}
	for _, d := range w.WatchList() {
		watched[filepath.Clean(d)] = true
	}
	for d := range dirs {
		if d = filepath.Clean(d); watched[d] {
			continue
		}
		if err := w.Add(d); err == nil {
			added = true
		} // else: gone since; a later scan sees it
	}
	return added
}

// existingAncestor returns dir or its nearest existing ancestor.
func existingAncestor(dir string) string {
	for {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return dir
		}
		dir = parent
	}
}
