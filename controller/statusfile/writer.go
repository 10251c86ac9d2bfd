package statusfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/tether-mcp/tether/controller/atomicfile"
	"github.com/tether-mcp/tether/controller/boundedfile"
	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/spec"
)

// Path returns where the status of a manifest file is written:
// <manifest-base>.status.yaml beside it, or, with statusDir, the same
// relative place under statusDir (root is the manifest tree's root).
func Path(root, statusDir, manifestPath string) string {
	p := filepath.Join(filepath.Dir(manifestPath), manifest.StatusName(manifestPath))
	if statusDir == "" {
		return p
	}
	rel, err := filepath.Rel(root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = filepath.Base(p)
	}
	return filepath.Join(statusDir, rel)
}

// DefaultWriteInterval is tether run's --status-write-interval: at most
// four writes a second of one status file (docs/contract.md §5a).
const DefaultWriteInterval = 250 * time.Millisecond

// DefaultWriteBurst is how many writes of one status file tether run lets
// go at once before the interval paces them: a reconnect (Reconnecting,
// then Connected) lands as it happens, while a flapping manifest still
// costs at most one write per interval once its burst is spent.
const DefaultWriteBurst = 4

// A write that failed is tried again by the writer itself, since nobody
// else may (the status of rejected documents, a write put off after the
// last change): first after the write interval (retryFirst when it is 0),
// doubling after each failure up to retryMax, so that a status directory
// that stays unwritable costs a try every few seconds per file
// (docs/reliability.md, row F13).
const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 5 * time.Second
)

// Writer owns the status files: it is the StatusSink of tether run on a
// manifest tree. It keeps the latest status document of every connection,
// renders each manifest's status file (one document per connection, in
// manifest order, together at most MaxFileSize bytes), and writes it
// atomically (temp file + rename) only when its bytes change, at most once
// per write interval (SetWriteInterval). Its maps have one lock; each
// status file has a lock of its own, held while it is rendered and
// written, so writes of different files run in parallel and writes of one
// file happen in the order their content was decided. A write that fails
// is never forgotten: the writer tries it again itself (retryDelay) until
// it lands or the writer is closed.
type Writer struct {
	root, statusDir string
	order           func(manifest string) []string
	interval        time.Duration
	burst           int

	mu       sync.Mutex
	rendered map[string]*document                                            // connection name → its status document
	rejected map[string][]rejected                                           // manifest → its rejected documents, after the connections'
	unsaved  map[string]bool                                                 // manifests whose rejected documents changed and have not landed
	written  map[string]string                                               // connection name → the manifest whose status file has it
	files    map[string][]byte                                               // status path → bytes on disk (nil: absent)
	state    map[string]*fileState                                           // status path → its write lock and pace
	dirs     map[string]*sync.Mutex                                          // status directory → held while a file is replaced in it
	write    func(path string, data []byte, perm, dirPerm fs.FileMode) error // atomicfile.Write; tests watch it
	closed   bool                                                            // Close ran: write at once from now on
}

// fileState paces the writes of one status file.
type fileState struct {
	mu       sync.Mutex    // held while the file is rendered and written
	manifest string        // the manifest the file is the status of
	pace     *rate.Limiter // writes that landed, one token each; nil: no pacing
	due      *time.Timer   // a write put off by the interval, or a retry, while one is
	gen      uint64        // which timer due is: one that was stopped or replaced finds another gen
	retry    bool          // due retries a failed write (a caller may write at once)
	fails    int           // failed writes since the last that landed, for the retry's backoff
	err      error         // why the last write failed, for the next caller
}

// arm makes f run after d as the file's pending write, in place of any
// pending one. Called with fs.mu held.
func (fs *fileState) arm(d time.Duration, retry bool, f func(gen uint64)) {
	fs.disarm()
	fs.gen++
	gen := fs.gen
	fs.retry = retry
	fs.due = time.AfterFunc(d, func() { f(gen) })
}

// disarm cancels the pending write: a timer that fired already finds its
// gen gone and does nothing. Called with fs.mu held.
func (fs *fileState) disarm() {
	if fs.due != nil {
		fs.due.Stop()
		fs.due = nil
	}
	fs.gen++
	fs.retry = false
}

// NewWriter returns a writer for the tree at root. order lists the
// connections a manifest declares, in document order (desired.Store.At).
func NewWriter(root, statusDir string, order func(manifest string) []string) *Writer {
	return &Writer{
		root:      root,
		statusDir: statusDir,
		order:     order,
		rendered:  map[string]*document{},
		rejected:  map[string][]rejected{},
		unsaved:   map[string]bool{},
		written:   map[string]string{},
		files:     map[string][]byte{},
		state:     map[string]*fileState{},
		dirs:      map[string]*sync.Mutex{},
		write:     atomicfile.Write,
	}
}

// SetWriteInterval makes each status file be written at most once per d
// (0: whenever its content changes), so that a manifest whose connections
// flap costs a few writes a second, not one per change. A change within d
// of the last write is written when d has passed, with whatever the
// content is then: the last state is always written. Close writes what is
// still due at once. Call it before the first Put.
func (w *Writer) SetWriteInterval(d time.Duration) { w.interval = d }

// SetWriteBurst lets n writes of one file go at once before the write
// interval paces them (a token bucket: one token back per interval; 1,
// the default, is one write per interval). Call it before the first Put.
func (w *Writer) SetWriteBurst(n int) { w.burst = max(n, 1) }

// Close writes at once every change still put off by the write interval
// or by a failed write, and every later one as it comes: the final status at shutdown is not
// delayed.
func (w *Writer) Close() error {
	w.mu.Lock()
	w.closed = true
	states := make([]*fileState, 0, len(w.state))
	for _, fs := range w.state {
		states = append(states, fs)
	}
	w.mu.Unlock()
	var errs []error
	for _, fs := range states {
		fs.mu.Lock()
		pending := fs.due != nil
		fs.disarm()
		fs.mu.Unlock()
		if pending {
			errs = append(errs, w.flush(fs.manifest, func() {}))
		}
	}
	return errors.Join(errs...)
}

// Path returns the status file of a manifest.
func (w *Writer) Path(manifest string) string {
	return Path(w.root, w.statusDir, manifest)
}

// Previous returns the status of e as found in the status file on disk, so
// that a restarted tether keeps transition times and counters.
func (w *Writer) Previous(e desired.Entry) (spec.ConnectionStatus, bool) {
	docs, _ := Read(w.Path(e.Origin))
	doc, ok := docs[e.Name]
	return doc.Status, ok
}

// Prune deletes the status files of manifests that are gone, so that a
// manifest removed while tether was not running leaves no status behind
// (tether get would show its connection forever). keep holds the manifest
// files of a full listing. Only files that read as tether status documents
// are removed; nothing is removed while the manifest root cannot be read (a
// mount not there yet is no reason to wipe the status directory). Call it
// before any Put. It returns the files it removed.
func (w *Writer) Prune(keep map[string]bool) ([]string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := os.Stat(w.root); err != nil {
		return nil, nil
	}
	top := w.root
	if w.statusDir != "" {
		top = w.statusDir
	}
	var removed []string
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // what cannot be read is left alone
		}
		if d.IsDir() {
			if p != top && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		base, ok := strings.CutSuffix(d.Name(), manifest.StatusSuffix)
		if !ok || !d.Type().IsRegular() {
			return nil
		}
		dir := filepath.Dir(p)
		if w.statusDir != "" {
			rel, err := filepath.Rel(w.statusDir, dir)
			if err != nil {
				return nil
			}
			dir = filepath.Join(w.root, rel)
		}
		if keep[filepath.Join(dir, base+".yaml")] || keep[filepath.Join(dir, base+".yml")] || !isStatusFile(p) {
			return nil
		}
		if err := os.Remove(p); err == nil {
			removed = append(removed, p)
		}
		return nil
	})
	return removed, err
}

// isStatusFile reports whether path starts like a status file tether wrote.
func isStatusFile(path string) bool {
	// Not os.Open: a FIFO named like a status file would hold it forever.
	f, _, err := boundedfile.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 128)
	n, _ := io.ReadFull(f, head)
	return bytes.HasPrefix(head[:n], []byte("apiVersion: "+spec.APIVersion+"\nkind: "+spec.Kind+"\n"))
}

// Put records the status of e and rewrites its manifest's status file if
// that changes it. A connection whose document moved to another manifest
// file leaves the old one first.
func (w *Writer) Put(e desired.Entry, st spec.ConnectionStatus) error {
	doc := spec.StatusDocument{
		APIVersion: spec.APIVersion,
		Kind:       spec.Kind,
		Metadata:   spec.ObjectMeta{Name: e.Name},
		Status:     st,
	}
	w.mu.Lock()
	old := w.written[e.Name]
	w.mu.Unlock()
	if old != "" && old != e.Origin {
		if err := w.flush(old, func() { delete(w.rendered, e.Name) }); err != nil {
			return err
		}
	}
	d := newDocument(doc)
	// written moves with the document, not with the write: a failed write
	// lands on the writer's retry, and a Delete then must find the file.
	// (A failed write of the old place above returns before this, written
	// still naming it: the retry of that file drops the document from it.)
	return w.flush(e.Origin, func() {
		w.rendered[e.Name] = d
		w.written[e.Name] = e.Origin
	})
}

// rejected is the status document of a document the tree's rules refused.
type rejected struct {
	manifest.Rejected
	doc *document
}

// SetRejected records the documents the tree's rules refused, by manifest
// file (a name declared in another file already): each gets a status
// document of phase Invalid in its file's status, saying why. A rejection
// that stays the same keeps its document and its transition time; files
// whose rejections changed, or whose last write of them has not landed,
// are rewritten.
func (w *Writer) SetRejected(byFile map[string][]manifest.Rejected, now time.Time) error {
	w.mu.Lock()
	var touched []string
	for file, old := range w.rejected {
		if _, ok := byFile[file]; !ok && len(old) > 0 {
			touched = append(touched, file)
		}
	}
	for file := range w.unsaved {
		if _, ok := byFile[file]; !ok && len(w.rejected[file]) == 0 {
			touched = append(touched, file)
		}
	}
	next := map[string][]rejected{}
	for file, rs := range byFile {
		old := w.rejected[file]
		// Not the same while the file does not show them yet: the same
		// rejections sent again try the write again.
		same := len(old) == len(rs) && !w.unsaved[file]
		for i, r := range rs {
			if i < len(old) && old[i].Rejected == r {
				next[file] = append(next[file], old[i])
				continue
			}
			same = false
			doc := spec.StatusDocument{
				APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.ObjectMeta{Name: r.Name},
				Status: spec.InvalidStatus(r.Error, now.UTC().Truncate(time.Second)),
			}
			next[file] = append(next[file], rejected{Rejected: r, doc: newDocument(doc)})
		}
		if !same {
			touched = append(touched, file)
		}
	}
	w.mu.Unlock()
	var errs []error
	for _, file := range touched {
		if err := w.flush(file, func() {
			if rs, ok := next[file]; ok {
				w.rejected[file] = rs
			} else {
				delete(w.rejected, file)
			}
			w.unsaved[file] = true // until a write of the file lands
		}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Delete forgets name and rewrites (or removes) the status file that held
// it.
func (w *Writer) Delete(name string) error {
	w.mu.Lock()
	file, ok := w.written[name]
	w.mu.Unlock()
	if !ok {
		return nil
	}
	// As in Put, written goes with the document: a failed write lands on
	// the writer's retry.
	return w.flush(file, func() {
		delete(w.rendered, name)
		if w.written[name] == file {
			delete(w.written, name)
		}
	})
}

// flush applies update to the documents and brings the manifest's status
// file in line with them, now or, within the write interval of its last
// write, once the interval has passed.
func (w *Writer) flush(manifest string, update func()) error {
	return w.sync(manifest, update, 0)
}

// sync is flush; timer, when not 0, says the pending write (fileState.arm)
// of that gen is what runs.
func (w *Writer) sync(manifest string, update func(), timer uint64) error {
	order := w.order(manifest)
	path := w.Path(manifest)
	w.mu.Lock()
	fs := w.state[path]
	if fs == nil {
		fs = &fileState{manifest: manifest}
		if w.interval > 0 {
			fs.pace = rate.NewLimiter(rate.Every(w.interval), max(w.burst, 1))
		}
		w.state[path] = fs
	}
	w.mu.Unlock()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if timer != 0 {
		if fs.due == nil || fs.gen != timer {
			// Stopped or replaced: whoever did it wrote, or armed another.
			return nil
		}
		fs.disarm()
	}
	again := func(gen uint64) { _ = w.sync(manifest, func() {}, gen) }

	w.mu.Lock()
	update()
	closed := w.closed
	if fs.due != nil && !fs.retry && !closed {
		// A write is due already: it takes the documents as they are then.
		w.mu.Unlock()
		return fs.err
	}
	var docs []*document
	for _, name := range order {
		if d, ok := w.rendered[name]; ok {
			docs = append(docs, d)
		}
	}
	for _, r := range w.rejected[manifest] {
		docs = append(docs, r.doc)
	}
	want := joinDocuments(fitDocuments(docs, MaxFileSize))
	have, known := w.files[path]
	w.mu.Unlock()

	if !known {
		// First touch since start: compare with what a previous run left.
		// Bounded: a FIFO or a link to /dev/zero planted as the status
		// file is not read, and the write below replaces it.
		if b, _, err := boundedfile.Read(path, spec.MaxFileSize); err == nil {
			have = b
		}
	}
	if len(want) == 0 && known && have == nil || len(want) > 0 && have != nil && bytes.Equal(have, want) {
		w.landed(fs, manifest, path, have)
		return nil
	}
	// Every attempt takes a token, one that fails too: a status directory
	// that cannot be written (read-only, a full disk) costs no more tries
	// than the pace allows, however many connections change meanwhile.
	if fs.pace != nil && !closed {
		now := time.Now()
		if tokens := fs.pace.TokensAt(now); tokens < 1 {
			fs.arm(time.Duration((1-tokens)*float64(w.interval))+time.Millisecond, false, again)
			return fs.err
		}
		fs.pace.AllowN(now, 1)
	}
	fs.disarm() // a retry pending: this write is it
	var err error
	if len(want) == 0 {
		if err = os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("removing status file: %w", err)
		} else {
			err = nil
		}
		want = nil
	} else if err = w.replace(path, want); err != nil {
		err = fmt.Errorf("writing status file: %w", err)
	}
	if err != nil {
		// Never forgotten: the writer tries again (with backoff) whether
		// or not the caller does, and tells the next caller why it has
		// not landed. Only a closed writer gives up: its caller exits.
		fs.err = err
		fs.fails++
		if !closed {
			fs.arm(w.retryDelay(fs.fails), true, again)
		}
		return err
	}
	w.landed(fs, manifest, path, want)
	return nil
}

// replace writes data to path (atomicfile.Write), one file of a directory
// at a time. The kernel creates the files of one directory one at a time
// anyway, under the directory's lock, and a writer that waits for that lock
// spins on a CPU while the holder runs: on ext4 without a journal, where
// each creation passes over the inodes freed in the last seconds to
// minutes, a creation takes hundreds of µs, and at 1,000 connections
// starting the workers that waited spun for a few percent of tether's CPU
// (perf: rwsem_spin_on_owner) that the connects needed. Waiting here, they
// sleep.
func (w *Writer) replace(path string, data []byte) error {
	dir := filepath.Dir(path)
	w.mu.Lock()
	l := w.dirs[dir]
	if l == nil {
		l = &sync.Mutex{}
		w.dirs[dir] = l
	}
	w.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	return w.write(path, data, 0o644, 0o755)
}

// landed records that the status file at path holds data: the documents
// of manifest as rendered, rejected ones included. Called with fs.mu held.
func (w *Writer) landed(fs *fileState, manifest, path string, data []byte) {
	fs.disarm()
	fs.err = nil
	fs.fails = 0
	w.mu.Lock()
	w.files[path] = data
	delete(w.unsaved, manifest)
	w.mu.Unlock()
}

// retryDelay is how long the writer waits before it tries again after the
// fails-th failed write in a row of one file.
func (w *Writer) retryDelay(fails int) time.Duration {
	d := w.interval
	if d <= 0 {
		d = retryFirst
	}
	for i := 1; i < fails && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

// joinDocuments is a status file's content. A file of one document is that
// document's rendering itself: what the writer keeps of each file (files)
// then costs no second copy (1,000 manifests of one connection each: ~2 MB,
// hack/bench -pprof). Neither is ever modified.
func joinDocuments(docs [][]byte) []byte {
	switch len(docs) {
	case 0:
		return nil
	case 1:
		return docs[0]
	}
	n := len(separator) * max(len(docs)-1, 0)
	for _, b := range docs {
		n += len(b)
	}
	out := make([]byte, 0, n)
	for i, b := range docs {
		if i > 0 {
			out = append(out, separator...)
		}
		out = append(out, b...)
	}
	return out
}
