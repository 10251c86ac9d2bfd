package manifest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/tether-mcp/tether/controller/desired"
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
	// every name. Run's changed argument, when not nil, replaces it.
	OnChange func(names []string)
	// ManifestErrors is told, after a listing, of every file whose number
	// of problems changed (n is 0 once a file is fixed or gone): the
	// tether_manifest_errors gauge.
	ManifestErrors func(file string, n int)
	// LastValid, when set, keeps the last valid spec of every connection
	// between runs: the first listing starts from what it saved, so a
	// manifest that is invalid when tether starts keeps its connection on
	// its last valid spec, as it does while tether runs.
	LastValid LastValidStore
	// NoLastValid, when LastValid is nil because the state directory was
	// refused, says why: a connection that has no valid spec to keep then
	// says it in its manifestError, so its status tells what a last valid
	// spec would have saved it from.
	NoLastValid string
	// OnRejected receives, after a listing that changed them, every file's
	// rejected documents (see Rejected), so their status can say why.
	OnRejected func(byFile map[string][]Rejected)
	// OnSynced is called once, after the first complete listing is in the
	// store, with the manifest files it found (tether run prunes the status
	// files of manifests removed while it was not running).
	OnSynced func(files map[string]bool)
	// SaveAfter, when set, holds the last valid specs of names the
	// LastValidStore does not hold yet back until it is closed (tether
	// run: once every connection has its first outcome, or 5 s after the
	// start), or until Run returns: a spec saved is a file created per
	// connection, and on a busy machine creating 1,000 files takes CPU
	// the connections' start needs. Specs that replace saved ones, and names gone, are saved
	// right after the first listing's changes are told, as every spec is
	// when SaveAfter is nil.
	SaveAfter <-chan struct{}
}

// LastValidStore keeps last valid specs between runs (controller/state).
type LastValidStore interface {
	LoadSpecs() (map[string]desired.Entry, []error)
	SaveSpec(e desired.Entry) error
	DeleteSpec(name string) error
}

// savedRef is what the LastValidStore holds for a name.
type savedRef struct {
	conn   *spec.McpConnection
	origin string
	index  int
}

// Source watches a manifest tree (fsnotify, one watcher for the whole tree)
// and keeps a DesiredState in line with it. It does not trust event names: on
// any relevant event it waits for the burst to settle, re-lists the tree and
// re-reads the files whose content changed. That makes editor save patterns,
// git checkouts and ConfigMap ..data swaps all converge to the files' final
// content.
type Source struct {
	opts    SourceOptions
	desired *desired.Store
	log     *slog.Logger
	// dirs is lastDirs, for other goroutines (Dirs).
	dirs atomic.Pointer[[]string]

	// owned by the Run goroutine
	cache     map[string]cachedFile
	watched   map[string]fileID // directory → the directory it named when its watch was added
	lastDirs  []string          // the directories of the last full listing
	prevErr   map[string]string
	counted   map[string]int        // files reported to ManifestErrors → their count
	problems  Problems              // of the last listing
	rejected  map[string][]Rejected // of the last listing
	saved     map[string]savedRef   // what LastValid holds; nil until loaded
	badIgnore map[string]string     // ignore files that cannot be used → why, as logged
	// hold keeps sync from saving (some) last valid specs (see Run);
	// unsaved is the desired state whose specs are still to be saved.
	hold    saveHold
	unsaved map[string]desired.Entry

	// afterList, if set (tests), runs between a listing and its watches.
	afterList func(dirs []string)
}

// saveHold is what saveLastValid holds back.
type saveHold int

const (
	holdNothing saveHold = iota
	// holdAll: Run's first listing saves nothing until its changes are
	// told.
	holdAll
	// holdNew: until SaveAfter, only the files of names the
	// LastValidStore does not hold yet wait. A spec that replaces a saved
	// one, or a name gone, is saved at once: else a tether killed before
	// SaveAfter would leave the older spec, and a manifest broken before
	// the next start would run on a spec its author had replaced.
	holdNew
)

type cachedFile struct {
	sum  [sha256.Size]byte
	docs []spec.Document
}

// NewSource returns a source that writes into store.
func NewSource(opts SourceOptions, store *desired.Store) *Source {
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
		desired: store,
		log:     opts.Logger,
		cache:   map[string]cachedFile{},
		watched: map[string]fileID{},
		prevErr: map[string]string{},
		counted: map[string]int{},
	}
}

// Sync lists and loads the tree once, without watching. Run calls it first;
// tests and one-shot tools may call it alone.
func (s *Source) Sync() error {
	_, err := s.sync()
	return err
}

// Run loads the tree, then watches it until ctx is done.
//
// It implements the controller's Source: changed (when not nil) receives
// the names whose entry changed, and synced (when not nil) is called once,
// after the first complete listing.
func (s *Source) Run(ctx context.Context, changed func(names []string), synced func()) error {
	if changed != nil {
		s.opts.OnChange = changed
	}
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
	// The first listing's changes are told after OnSynced, so that what
	// OnSynced does (pruning status files) comes before any reconcile.
	notify := s.opts.OnChange
	var firstChanges []string
	s.opts.OnChange = func(names []string) { firstChanges = append(firstChanges, names...) }
	// Saving a last valid spec is a file created per connection (about a
	// second of a loaded machine's time at 1,000 connections) that only
	// the next run reads: the connections start first.
	s.hold = holdAll
	defer s.releaseSaves() // what SaveAfter still holds back, as the run ends
	rootOK, growing := s.relist(w)
	s.opts.OnChange = notify
	if s.opts.OnSynced != nil {
		s.opts.OnSynced(s.files())
	}
	if synced != nil {
		synced()
	}
	if len(firstChanges) > 0 && notify != nil {
		notify(firstChanges)
	}
	saveAfter := s.opts.SaveAfter
	if saveAfter == nil {
		s.releaseSaves()
	} else {
		s.hold = holdNew
		s.saveLastValid()
	}

	resync := time.NewTicker(s.opts.Resync)
	defer resync.Stop()
	// While the root is missing, poll for it: a removed directory's watch is
	// gone and recreating it produces no event we could see.
	poll := time.NewTicker(time.Second)
	defer poll.Stop()

	deb := &Debouncer{Quiet: s.opts.Debounce, MaxDelay: s.opts.MaxDelay}
	kick := deb.Kick
	if growing {
		kick()
	}
	for {
		select {
		case <-ctx.Done():
			deb.Stop()
			return nil
		case <-saveAfter:
			saveAfter = nil
			s.releaseSaves()
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
		case <-deb.C():
			deb.Done()
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
	return IsStatusName(filepath.Base(ev.Name))
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
		if errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("the manifest directory is gone; its connections are removed until it is back",
				"dir", s.opts.Root)
		} else if err != nil {
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
	return idOf(path, fi)
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
	// A root that is gone lists as an empty tree: so are its manifests.
	tree, err := ListTree(s.opts.Root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// The root cannot be read now (permissions, EMFILE): what it holds
		// is unknown, not gone. Keep every connection and every watch.
		return s.lastDirs, err
	}
	s.reportBadIgnoreFiles(tree.BadIgnoreFiles)
	files := loadFiles(tree.Files, s.load)
	seen := make(map[string]bool, len(tree.Files))
	for _, path := range tree.Files {
		seen[path] = true
	}
	// Files known before under a directory that cannot be read now keep
	// their connections, with the error, as an unreadable file does.
	for dir, derr := range tree.Unreadable {
		s.log.Warn("cannot list a directory of the manifest tree; keeping what it declared", "dir", dir, "err", derr)
		for path := range s.files() {
			if !seen[path] && strings.HasPrefix(path, dir+string(filepath.Separator)) {
				seen[path] = true
				files = append(files, File{Path: path, Err: fmt.Errorf("%s: directory %s cannot be read: %w", path, dir, derr)})
			}
		}
	}
	s.lastDirs = tree.Dirs
	s.dirs.Store(&tree.Dirs)
	for path := range s.cache {
		if !seen[path] {
			delete(s.cache, path)
		}
	}
	prev := s.desired.Entries()
	if s.opts.LastValid != nil && s.saved == nil {
		// The first listing of this run: start from the specs the last
		// run saved, as if they had been listed just before.
		s.saved = map[string]savedRef{}
		loaded, problems := s.opts.LastValid.LoadSpecs()
		for _, err := range problems {
			s.log.Warn("a saved last valid spec cannot be used", "err", err)
		}
		for name, e := range loaded {
			s.saved[name] = savedRef{conn: e.Conn, origin: e.Origin, index: e.Index}
			if _, ok := prev[name]; !ok {
				prev[name] = e
			}
		}
	}
	next, problems, rejected := Resolve(prev, files)
	if s.opts.NoLastValid != "" {
		for name, e := range next {
			if e.Conn == nil && e.ManifestError != "" {
				e.ManifestError += " (no last valid spec is kept: " + s.opts.NoLastValid + ")"
				next[name] = e
			}
		}
	}
	changed := s.desired.Replace(next)
	s.problems = problems
	if s.opts.OnRejected != nil && !reflect.DeepEqual(rejected, s.rejected) {
		s.opts.OnRejected(rejected)
	}
	s.rejected = rejected
	s.reportFileErrors()
	if len(changed) > 0 && s.opts.OnChange != nil {
		s.opts.OnChange(changed)
	}
	// After the changes are told: reconciles need not wait for the disk.
	s.unsaved = next
	s.saveLastValid()
	return tree.Dirs, err
}

// load reads one file, reusing the last decode when its bytes did not change.
func (s *Source) load(path string) File {
	data, bad := readManifest(path, path)
	if bad != nil {
		delete(s.cache, path)
		return *bad
	}
	sum := sha256.Sum256(data)
	if c, ok := s.cache[path]; ok && c.sum == sum {
		return File{Path: path, Docs: c.docs}
	}
	docs := DecodeData(path, data)
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
	return File{Path: path, Docs: docs}
}

// reportBadIgnoreFiles logs each ignore file that cannot be used once,
// when why changes; the listing went on without its rules.
func (s *Source) reportBadIgnoreFiles(bad map[string]error) {
	for file, err := range bad {
		why := ErrorReason(err).Error()
		if s.badIgnore[file] == why {
			continue
		}
		if s.badIgnore == nil {
			s.badIgnore = map[string]string{}
		}
		s.badIgnore[file] = why
		s.log.Error("cannot use an ignore file: its directory is listed without its rules", "file", file, "err", why)
	}
	for file := range s.badIgnore {
		if _, ok := bad[file]; !ok {
			delete(s.badIgnore, file)
		}
	}
}

// reportFileErrors logs each file's problems once, when they change.
func (s *Source) reportFileErrors() {
	errs := s.problems
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
	if s.opts.ManifestErrors != nil {
		for file, list := range errs {
			if s.counted[file] != len(list) {
				s.opts.ManifestErrors(file, len(list))
				s.counted[file] = len(list)
			}
		}
		for file := range s.counted {
			if _, ok := errs[file]; !ok {
				s.opts.ManifestErrors(file, 0)
				delete(s.counted, file)
			}
		}
	}
}

// Files returns the manifest files of the last listing that declare a
// connection or have a problem.
func (s *Source) files() map[string]bool {
	files := map[string]bool{}
	for _, e := range s.desired.Entries() {
		files[e.Origin] = true
	}
	for f := range s.problems {
		files[f] = true
	}
	return files
}

// Dirs returns the directories the last listing read manifests from:
// every directory of the tree, and those its symbolic links name. It is
// nil before the first listing, and for a nil Source; safe to call from
// any goroutine. Sandbox grants and container mounts may not write there
// (controller/connection): they take the source's listing rather than
// list the tree once more at every connect.
func (s *Source) Dirs() []string {
	if s == nil {
		return nil
	}
	if d := s.dirs.Load(); d != nil {
		return *d
	}
	return nil
}

// releaseSaves ends the hold on saving last valid specs, saving what the
// last listing held back.
func (s *Source) releaseSaves() {
	if s.hold != holdNothing {
		s.hold = holdNothing
		s.saveLastValid()
	}
}

// saveLastValid brings the LastValidStore in line with the desired state
// of the last listing (unsaved): each connection's last valid spec saved,
// those of names gone forgotten, but for what s.hold holds back. A write
// that fails is logged and tried again at the next listing.
func (s *Source) saveLastValid() {
	if s.hold == holdAll {
		return
	}
	next := s.unsaved
	if s.hold == holdNothing {
		s.unsaved = nil
	}
	if s.opts.LastValid == nil || next == nil {
		return
	}
	for name, e := range next {
		if e.Conn == nil {
			continue
		}
		want := savedRef{conn: e.Conn, origin: e.Origin, index: e.Index}
		have, ok := s.saved[name]
		if ok && have == want || !ok && s.hold == holdNew {
			continue
		}
		if err := s.opts.LastValid.SaveSpec(e); err != nil {
			s.log.Warn("cannot save the last valid spec", "connection", name, "err", err)
			continue
		}
		s.saved[name] = want
	}
	for name := range s.saved {
		if _, ok := next[name]; ok {
			continue
		}
		if err := s.opts.LastValid.DeleteSpec(name); err != nil {
			s.log.Warn("cannot forget the last valid spec", "connection", name, "err", err)
			continue
		}
		delete(s.saved, name)
	}
}
