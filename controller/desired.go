package controller

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/tether-mcp/tether/spec"
)

// Entry is the desired state of one connection.
type Entry struct {
	Name  string
	File  string // the manifest file that declares it
	Index int    // document index in File
	// Conn is the last valid spec for this name; nil when it was never valid.
	Conn *spec.McpConnection
	// ManifestError is set while the current file content for this name is
	// invalid (Conn then still holds the last valid spec, if any).
	ManifestError string
}

func (e *Entry) equal(o *Entry) bool {
	if e == nil || o == nil {
		return e == o
	}
	return e.Name == o.Name && e.File == o.File && e.Index == o.Index &&
		e.Conn == o.Conn && e.ManifestError == o.ManifestError
}

// ParsedFile is one manifest file as the source last read it.
type ParsedFile struct {
	Path string
	// Err is a whole-file problem (unreadable); Docs is then empty.
	Err  error
	Docs []spec.Document
}

// FileErrors are the problems of one manifest file, as reported in logs and
// the tether_manifest_errors metric.
type FileErrors struct {
	File   string
	Errors []string
}

// DesiredState is the store of desired connections: the last valid spec per
// connection name and the manifest errors in force. The source is its only
// writer; reconcilers read it. One lock owns it.
type DesiredState struct {
	mu      sync.RWMutex
	entries map[string]*Entry
	order   map[string][]string // manifest file → names in document order
	errors  map[string][]string // manifest file → problems
}

// NewDesiredState returns an empty store.
func NewDesiredState() *DesiredState {
	return &DesiredState{
		entries: map[string]*Entry{},
		order:   map[string][]string{},
		errors:  map[string][]string{},
	}
}

// Get returns a copy of the entry for name.
func (d *DesiredState) Get(name string) (Entry, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	e, ok := d.entries[name]
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

// Names returns every known connection name, sorted.
func (d *DesiredState) Names() []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	names := make([]string, 0, len(d.entries))
	for n := range d.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// FileOrder returns the names a manifest file holds, in document order.
func (d *DesiredState) FileOrder(file string) []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return append([]string(nil), d.order[file]...)
}

// Files returns the manifest files of the last listing that declare a
// connection or have a problem.
func (d *DesiredState) Files() map[string]bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	files := make(map[string]bool, len(d.order)+len(d.errors))
	for f := range d.order {
		files[f] = true
	}
	for f := range d.errors {
		files[f] = true
	}
	return files
}

// FileErrors returns the current problems of every manifest file that has any.
func (d *DesiredState) FileErrors() map[string][]string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make(map[string][]string, len(d.errors))
	for f, errs := range d.errors {
		out[f] = append([]string(nil), errs...)
	}
	return out
}

type claim struct {
	file string
	doc  *spec.Document
}

// Replace recomputes the desired state from a full listing of the tree and
// returns the names whose entry changed (added, changed or removed).
//
// It is level-triggered: the result depends only on the files and on the
// previous state (for the last valid spec and for which file owned a name
// first), never on which events led here. Rules:
//   - a valid document sets its name's spec;
//   - an invalid document keeps its name's last valid spec and sets
//     ManifestError;
//   - a name declared in two files belongs to the file that had it before
//     (else the first in path order); the other file gets an error;
//   - a name no file declares any more is removed, unless its file still
//     exists and holds a document whose name cannot be read (a typo must not
//     tear down a working connection).
func (d *DesiredState) Replace(files []ParsedFile) (changed []string) {
	d.mu.Lock()
	defer d.mu.Unlock()

	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })

	claims := map[string][]claim{}
	fileErrs := map[string][]string{}
	opaque := map[string]string{} // files with content whose names cannot all be read → first problem
	present := map[string]bool{}
	for i := range files {
		f := &files[i]
		present[f.Path] = true
		if f.Err != nil {
			fileErrs[f.Path] = append(fileErrs[f.Path], f.Err.Error())
			opaque[f.Path] = f.Err.Error()
			continue
		}
		for j := range f.Docs {
			doc := &f.Docs[j]
			for _, e := range doc.Errors {
				fileErrs[f.Path] = append(fileErrs[f.Path], e.Error())
			}
			if doc.Name == "" {
				if len(doc.Errors) > 0 {
					if _, ok := opaque[f.Path]; !ok {
						opaque[f.Path] = joinErrors(doc.Errors)
					}
				}
				continue
			}
			claims[doc.Name] = append(claims[doc.Name], claim{file: f.Path, doc: doc})
		}
	}

	next := map[string]*Entry{}
	order := map[string][]string{}
	duplicate := func(c claim, name, owner string) {
		msg := fmt.Sprintf("%s: document %d (line %d): metadata.name: %q is already declared in %s",
			c.file, c.doc.Index+1, c.doc.Line, name, owner)
		fileErrs[c.file] = append(fileErrs[c.file], msg)
	}
	for name, cs := range claims {
		// A file that cannot be read in full keeps the names it had.
		if old, ok := d.entries[name]; ok && present[old.File] && opaque[old.File] != "" && !claimedBy(cs, old.File) {
			e := *old
			e.ManifestError = opaque[old.File]
			next[name] = &e
			for _, c := range cs {
				duplicate(c, name, old.File)
			}
			continue
		}
		owner := 0
		if old, ok := d.entries[name]; ok {
			for i, c := range cs {
				if c.file == old.File {
					owner = i
					break
				}
			}
		}
		for i, c := range cs {
			if i == owner {
				continue
			}
			duplicate(c, name, cs[owner].file)
		}
		c := cs[owner]
		e := &Entry{Name: name, File: c.file, Index: c.doc.Index}
		if old, ok := d.entries[name]; ok {
			e.Conn = old.Conn
		}
		if len(c.doc.Errors) == 0 && c.doc.Conn != nil {
			e.Conn = keepIfSame(e.Conn, c.doc.Conn)
		} else {
			e.ManifestError = joinErrors(c.doc.Errors)
		}
		next[name] = e
	}
	// Names nobody declares any more survive only in a file that still
	// exists but cannot be read in full.
	for name, old := range d.entries {
		if _, ok := next[name]; ok {
			continue
		}
		problem, isOpaque := opaque[old.File]
		if !present[old.File] || !isOpaque {
			continue
		}
		e := *old
		e.ManifestError = problem
		next[name] = &e
	}
	for name, e := range next {
		order[e.File] = append(order[e.File], name)
	}
	for file, names := range order {
		sort.Slice(names, func(i, j int) bool { return next[names[i]].Index < next[names[j]].Index })
		order[file] = names
	}

	for name, e := range next {
		if !e.equal(d.entries[name]) {
			changed = append(changed, name)
		}
	}
	for name := range d.entries {
		if _, ok := next[name]; !ok {
			changed = append(changed, name)
		}
	}
	sort.Strings(changed)
	d.entries, d.order, d.errors = next, order, fileErrs
	return changed
}

func claimedBy(cs []claim, file string) bool {
	for _, c := range cs {
		if c.file == file {
			return true
		}
	}
	return false
}

// keepIfSame returns old when it holds the same spec as new, so that an
// unchanged document keeps its identity (cheap equality for reconcilers).
func keepIfSame(old, new *spec.McpConnection) *spec.McpConnection {
	if old == new {
		return old // the source reused the last decode: the bytes did not change
	}
	if old != nil && old.Metadata.Name == new.Metadata.Name &&
		old.Spec.Hash() == new.Spec.Hash() && labelsEqual(old.Metadata.Labels, new.Metadata.Labels) {
		return old
	}
	return new
}

func labelsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func joinErrors(errs []*spec.FieldError) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}
