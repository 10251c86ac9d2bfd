package controller

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/tether-mcp/tether/spec"
)

// SourceOptions configures a Source.
type SourceOptions struct {
	Root   string
	Logger *slog.Logger
	// Debounce is how long the source waits for events to settle before it
	// re-lists (default 50ms); MaxDelay bounds the wait under a steady stream
	// of events (default 500ms).
	Debounce, MaxDelay time.Duration
	// Resync re-reads everything and re-enqueues every name (default 5m).
	Resync time.Duration
	// Selector keeps only the documents whose labels it accepts (nil: all).
	Selector func(labels map[string]string) bool
	// OnChange receives the names whose desired state changed; on a resync,
	// every name.
	OnChange func(names []string)
	// OnListed is called after every listing with the manifest files' problems.
	OnListed func(fileErrors map[string][]string)
}

// Source watches a manifest tree (fsnotify, one watcher for the whole tree)
// and keeps a DesiredState in line with it. It does not trust event names: on
// any relevant event it waits for the burst to settle, re-lists the tree and
// re-reads the files whose content changed. That makes editor save patterns,
// git checkouts and ConfigMap ..data swaps all converge to the files' final
// content.
type Source struct {
	opts    SourceOptions
	desired *DesiredState
	log     *slog.Logger

	// owned by the Run goroutine
	cache    map[string]cachedFile
	watched  map[string]fileID // directory → the directory it named when its watch was added
	lastDirs []string          // the directories of the last full listing
	prevErr  map[string]string

	// afterList, if set (tests), runs between a listing and its watches.
	afterList func(dirs []string)
}

type cachedFile struct {
	sum  [sha256.Size]byte
	docs []spec.Document
}

// NewSource returns a source that writes into desired.
func NewSource(opts SourceOptions, desired *DesiredState) *Source {
	if opts.Debounce <= 0 {
		opts.Debounce = 50 * time.Millisecond
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = 500 * time.Millisecond
	}
	if opts.Resync <= 0 {
		opts.Resync = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Source{
		opts:    opts,
		desired: desired,
		log:     opts.Logger,
		cache:   map[string]cachedFile{},
		watched: map[string]fileID{},
		prevErr: map[string]string{},
	}
}

// Sync lists and loads the tree once, without watching. Run calls it first;
// tests and one-shot tools may call it alone.
func (s *Source) Sync() error {
	_, err := s.sync()
	return err
}

// Run loads the tree, then watches it until ctx is done.
func (s *Source) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("starting the file watcher: %w", err)
	}
	defer w.Close()

	// The root is watched before the first listing, so that a flat tree
	// needs one listing, not two (see relist).
	if fi, err := os.Stat(s.opts.Root); err == nil && fi.IsDir() {
		s.watch(w, append([]string{s.opts.Root}, linkParents(s.opts.Root)...))
	}
	rootOK, growing := s.relist(w)

	resync := time.NewTicker(s.opts.Resync)
	defer resync.Stop()
	// While the root is missing, poll for it: a removed directory's watch is
	// gone and recreating it produces no event we could see.
	poll := time.NewTicker(time.Second)
	defer poll.Stop()

	var debounce <-chan time.Time
	var timer *time.Timer
	var first time.Time
	kick := func() {
		now := time.Now()
		if timer == nil {
			first = now
			timer = time.NewTimer(s.opts.Debounce)
			debounce = timer.C
			return
		}
		// Keep waiting while events keep coming, up to MaxDelay.
		wait := s.opts.Debounce
		if rest := s.opts.MaxDelay - now.Sub(first); rest < wait {
			wait = max(rest, 0)
		}
		timer.Reset(wait)
	}
	if growing {
		kick()
	}
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("file watcher closed")
			}
			if s.ignore(ev) {
				continue
			}
			if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
				// A watched directory that goes is unwatched by the kernel.
				// Forget it, so that the next listing watches whatever
				// directory has the path then: one recreated at once often
				// gets the same inode number, and would look watched.
				delete(s.watched, ev.Name)
			}
			kick()
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("file watcher closed")
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				s.log.Warn("file watcher queue overflowed; re-listing everything")
			} else {
				s.log.Warn("file watcher error; re-listing everything", "err", err)
			}
			kick()
		case <-debounce:
			timer, debounce = nil, nil
			if rootOK, growing = s.relist(w); growing {
				kick()
			}
		case <-poll.C:
			if !rootOK {
				if _, err := os.Stat(s.opts.Root); err == nil {
					if rootOK, growing = s.relist(w); growing {
						kick()
					}
				}
			}
		case <-resync.C:
			if rootOK, growing = s.relist(w); growing {
				kick()
			}
			if s.opts.OnChange != nil {
				s.opts.OnChange(s.desired.Names())
			}
		}
	}
}

// ignore drops the events tether causes itself: status files and their
// temporaries. Everything else, hidden names included (a ConfigMap's ..data
// swap names nothing else), leads to a re-list.
func (s *Source) ignore(ev fsnotify.Event) bool {
	base := filepath.Base(ev.Name)
	return strings.Contains(base, ".status.yaml") || strings.Contains(base, ".status.yml")
}

// relist re-reads the tree and updates the watches. It reports whether the
// root could be listed, and whether the tree is still growing new
// directories, so that the caller lists again soon.
//
// A directory is listed before its watch is added, so a file created in a
// new directory between the two would be seen by neither: relist lists
// again after adding watches, until a listing finds no directory it does
// not watch yet.
func (s *Source) relist(w *fsnotify.Watcher) (rootOK, growing bool) {
	for pass := 1; ; pass++ {
		dirs, err := s.sync()
		if s.afterList != nil {
			s.afterList(dirs)
		}
		added := s.watch(w, append(dirs, linkParents(s.opts.Root)...))
		if added && pass < maxRelistPasses {
			continue
		}
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist):
			s.log.Warn("the manifest directory is gone; its connections are removed until it is back",
				"dir", s.opts.Root)
		default:
			s.log.Warn("cannot list the manifest directory; keeping the last listing until it can",
				"dir", s.opts.Root, "err", err)
		}
		return err == nil, added
	}
}

// maxRelistPasses bounds one relist under a tree that keeps growing new
// directories; the caller lists again after a debounce.
const maxRelistPasses = 4

// watch brings the watches in line with dirs and reports whether it added
// one. A watch follows the directory it was added on, not its path: when a
// path names another directory than before (a git-sync or ConfigMap link
// swapped under it), the watch is moved, or changes in the new directory
// would go unseen.
func (s *Source) watch(w *fsnotify.Watcher, dirs []string) (added bool) {
	want := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		want[d] = true
		id, _ := dirID(d)
		if old, ok := s.watched[d]; ok {
			if old == id {
				continue
			}
			_ = w.Remove(d) // the old directory may be gone already
			delete(s.watched, d)
		}
		if err := w.Add(d); err != nil {
			s.log.Warn("cannot watch directory", "dir", d, "err", err)
			continue
		}
		s.watched[d] = id
		added = true
	}
	for d := range s.watched {
		if !want[d] {
			_ = w.Remove(d) // the directory may be gone already
			delete(s.watched, d)
		}
	}
	return added
}

// dirID identifies the directory a path names now (symlinks followed).
func dirID(path string) (fileID, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, false
	}
	return idOf(fi)
}

// linkParents returns the directories that hold a symlink on the way to
// root (root itself included): a swap of such a link (git-sync's
// --link, a ConfigMap mounted at --dir) is an event there and nowhere in
// the tree, so they are watched too.
func linkParents(root string) []string {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil
	}
	var dirs []string
	for p := abs; ; p = filepath.Dir(p) {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			dirs = append(dirs, filepath.Dir(p))
		}
		if filepath.Dir(p) == p {
			return dirs
		}
	}
}

// sync lists the tree, re-reads changed files, replaces the desired state
// and reports changes. It returns the directories to watch.
func (s *Source) sync() ([]string, error) {
	tree, err := ListTree(s.opts.Root)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		tree = Tree{} // the directory is gone: so are its manifests
	default:
		// The root cannot be read now (permissions, EMFILE): what it holds
		// is unknown, not gone. Keep every connection and every watch.
		return s.lastDirs, err
	}
	files := make([]ParsedFile, 0, len(tree.Files))
	seen := make(map[string]bool, len(tree.Files))
	statusOwner := make(map[string]string, len(tree.Files))
	for _, path := range tree.Files {
		seen[path] = true
		// x.yaml and x.yml would share x.status.yaml: the first (in path
		// order) keeps it, the other is an error until one is renamed.
		sp := StatusPath(s.opts.Root, "", path)
		if other, ok := statusOwner[sp]; ok {
			files = append(files, ParsedFile{Path: path, Err: fmt.Errorf("%s: its status file %s would be %s's too: rename one of them", path, filepath.Base(sp), filepath.Base(other))})
			continue
		}
		statusOwner[sp] = path
		files = append(files, s.load(path))
	}
	// Files known before under a directory that cannot be read now keep
	// their connections, with the error, as an unreadable file does.
	if len(tree.Unreadable) > 0 {
		for path := range s.desired.Files() {
			if seen[path] {
				continue
			}
			for dir, derr := range tree.Unreadable {
				if strings.HasPrefix(path, dir+string(filepath.Separator)) {
					seen[path] = true
					files = append(files, ParsedFile{Path: path, Err: fmt.Errorf("%s: directory %s cannot be read: %w", path, dir, derr)})
					break
				}
			}
		}
		for dir, derr := range tree.Unreadable {
			s.log.Warn("cannot list a directory of the manifest tree; keeping what it declared", "dir", dir, "err", derr)
		}
	}
	s.lastDirs = tree.Dirs
	for path := range s.cache {
		if !seen[path] {
			delete(s.cache, path)
		}
	}
	changed := s.desired.Replace(files)
	s.reportFileErrors()
	if len(changed) > 0 && s.opts.OnChange != nil {
		s.opts.OnChange(changed)
	}
	return tree.Dirs, err
}

// load reads one file, reusing the last decode when its bytes did not change.
func (s *Source) load(path string) ParsedFile {
	data, size, err := readBounded(path)
	if err != nil {
		delete(s.cache, path)
		return ParsedFile{Path: path, Err: fmt.Errorf("%s: %w", path, err)}
	}
	if docs := spec.OversizedFile(path, size); docs != nil {
		delete(s.cache, path)
		return ParsedFile{Path: path, Docs: docs}
	}
	sum := sha256.Sum256(data)
	if c, ok := s.cache[path]; ok && c.sum == sum {
		return ParsedFile{Path: path, Docs: c.docs}
	}
	docs := spec.DecodeFile(path, data)
	if s.opts.Selector != nil {
		kept := docs[:0:0]
		for _, d := range docs {
			// A document that cannot be decoded is kept so its error shows.
			if d.Conn == nil || s.opts.Selector(d.Conn.Metadata.Labels) {
				kept = append(kept, d)
			}
		}
		docs = kept
	}
	s.cache[path] = cachedFile{sum: sum, docs: docs}
	return ParsedFile{Path: path, Docs: docs}
}

// readBounded reads a file of at most spec.MaxFileSize bytes; for a larger
// one it reads nothing and returns the size, so the error can say it.
func readBounded(path string) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("not a regular file")
	}
	if fi.Size() > spec.MaxFileSize {
		return nil, fi.Size(), nil
	}
	// The file may grow between Stat and read: bound the read as well.
	data, err := io.ReadAll(io.LimitReader(f, spec.MaxFileSize+1))
	return data, int64(len(data)), err
}

// reportFileErrors logs each file's problems once, when they change.
func (s *Source) reportFileErrors() {
	errs := s.desired.FileErrors()
	for file, list := range errs {
		joined := strings.Join(list, "\n")
		if s.prevErr[file] == joined {
			continue
		}
		s.prevErr[file] = joined
		for _, e := range list {
			s.log.Error("invalid manifest", "file", file, "err", e)
		}
	}
	for file := range s.prevErr {
		if _, ok := errs[file]; !ok {
			delete(s.prevErr, file)
			if _, err := os.Stat(file); err == nil {
				s.log.Info("manifest is valid again", "file", file)
			}
		}
	}
	if s.opts.OnListed != nil {
		s.opts.OnListed(errs)
	}
}
