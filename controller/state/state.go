// Package state is tether's state directory (tether run --state-dir): what
// tether keeps between runs, beside but apart from the status it reports.
//
//	specs/<name>.json     the last valid spec of each connection, so that a
//	                      manifest that is invalid when tether starts keeps
//	                      its connection, as it does while tether runs
//	catalogs/<name>.json  what each server published the last time it ran
//	                      (controller/catalog): served while an OnDemand
//	                      server is stopped, and the base of catalog drift
//	groups/<pgid>.json    the process groups of running stdio children
//	                      (controller/connection's GroupLedger)
//	tokens/<name>.json    the OAuth tokens tether login stored, kept current
//	                      by tether run (controller/oauth's Store)
//	containers/<container>/  the env and secret files of a running container
//	                      server (controller/connection's container.go),
//	                      removed with the container
//
// The directory is mode 0700 and every file 0600 (but the files of
// containers/, which the container's user must read: 0444 under its 0700
// directory): a spec may hold plain env and header values, and a spec's
// command is run. An existing directory
// that another user owns or others may write is refused whole (Open), and
// each file read must pass the same check. Files are written atomically. A file that cannot be
// read back (corrupt, from another program, from a newer tether) is
// ignored and reported, never trusted.
package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tether-mcp/tether/controller/atomicfile"
	"github.com/tether-mcp/tether/controller/boundedfile"
	"github.com/tether-mcp/tether/controller/catalog"
	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/spec"
)

// DirName is the state directory's name under the status location when
// --state-dir is not given. Hidden, so the manifest tree never lists it.
const DirName = ".tether"

// Dir is an open state directory.
type Dir struct {
	path    string
	root    *os.Root // the directory as opened and checked: every read goes through it
	maxFile int64
}

// subdirs are the directories tether keeps in a state directory.
var subdirs = []string{"specs", "catalogs", "groups", "tokens", "containers"}

// DefaultMaxFileSize bounds each file read from a state directory (tether
// run --max-state-file-size): above the largest spec (a manifest is at most
// spec.MaxFileSize) and a catalog of thousands of tools.
const DefaultMaxFileSize = 64 << 20

// ErrRefused is wrapped by Open's error for a directory that is not
// tether's alone.
var ErrRefused = errors.New("is refused")

// Open makes the directory (mode 0700) when missing and checks that tether
// can write there; a read-only one is an error that names it. An existing
// one must be tether's alone: owned by tether's user and not writable by
// group or others, it and each directory tether keeps in it. Otherwise
// someone else could have planted a last valid spec, whose command tether
// would run, or a process group for tether to stop; such a directory is
// refused whole with an error that names it and says why. maxFile bounds
// each file read from it (0: DefaultMaxFileSize).
//
// The directory is opened once (os.Root) and checked on what was opened;
// every later read goes through that open directory, so a directory
// swapped in after the check (someone who may write its parent renames it
// away) is never read. The directories above it must not let anyone but
// tether's user and root rename it: each is owned by one of them and, if
// group or others may write it, sticky (as /tmp). Otherwise it is refused
// too: what still goes by path (the writes, the tokens) would follow a
// swapped-in directory.
func Open(path string, maxFile int64) (*Dir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("state directory %s: %w", path, err)
	}
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", path, errorReason(err))
	}
	if err := checkOpened(root, path); err != nil {
		root.Close()
		return nil, err
	}
	probe := ".probe-" + strconv.Itoa(os.Getpid())
	f, err := root.OpenFile(probe, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("state directory %s is not writable: %w", path, errorReason(err))
	}
	f.Close()
	_ = root.Remove(probe)
	if maxFile <= 0 {
		maxFile = DefaultMaxFileSize
	}
	return &Dir{path: path, root: root, maxFile: maxFile}, nil
}

// OpenReadOnly opens an existing state directory for reading only, with
// Open's checks, creating and writing nothing: what tether diff reads of a
// running tether. A missing directory is an error that wraps
// fs.ErrNotExist.
func OpenReadOnly(path string, maxFile int64) (*Dir, error) {
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", path, err)
	}
	if err := checkOpened(root, path); err != nil {
		root.Close()
		return nil, err
	}
	if maxFile <= 0 {
		maxFile = DefaultMaxFileSize
	}
	return &Dir{path: path, root: root, maxFile: maxFile}, nil
}

// checkOpened checks the opened directory, the directories tether keeps in
// it (found from it, a symlink refused) and the directories above it.
func checkOpened(root *os.Root, path string) error {
	refused := func(p string, err error) error {
		return fmt.Errorf("state directory %s %w, nothing in it is used: %s: %v (it must be tether's user's and mode 0700: fix it, or remove it for tether to make it anew)", path, ErrRefused, p, errorReason(err))
	}
	for _, sub := range append([]string{"."}, subdirs...) {
		fi, err := root.Lstat(sub)
		if sub != "." && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil && !fi.IsDir() {
			err = errors.New("not a directory")
		}
		if err == nil {
			err = boundedfile.CheckPrivate(fi)
		}
		if err != nil {
			return refused(filepath.Join(path, sub), err)
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", path, err)
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			err = boundedfile.CheckAncestor(fi)
		}
		if err != nil {
			return fmt.Errorf("state directory %s %w, nothing in it is used: the directory above it %s: %v (someone else could swap the state directory: fix it, or give tether run --state-dir a directory under one only tether's user and root may write)", path, ErrRefused, p, errorReason(err))
		}
		if filepath.Dir(p) == p {
			return nil
		}
	}
}

// Close closes the directory.
func (d *Dir) Close() error { return d.root.Close() }

// RemoveTemporaries removes the temporary files that a tether killed while
// it wrote (atomicfile.Write) left in the directory, and returns them. Call
// it at start, before anything writes there.
func (d *Dir) RemoveTemporaries() ([]string, error) {
	var all []string
	for _, p := range append([]string{""}, subdirs...) {
		removed, err := atomicfile.RemoveTemporaries(filepath.Join(d.path, p), func(target string) bool {
			return strings.HasSuffix(target, ".json")
		})
		all = append(all, removed...)
		if err != nil {
			return all, fmt.Errorf("state: %w", err)
		}
	}
	return all, nil
}

// read reads one file of the directory, name relative to it: a regular
// file under the size limit, tether's user's and not writable by others,
// or an error that says why.
func (d *Dir) read(name string) ([]byte, error) {
	data, fi, err := boundedfile.ReadIn(d.root, name, d.maxFile)
	if err != nil {
		return nil, err
	}
	if err := boundedfile.CheckPrivate(fi); err != nil {
		return nil, err
	}
	return data, nil
}

// list lists a directory tether keeps in the directory.
func (d *Dir) list(sub string) ([]fs.DirEntry, error) {
	f, err := d.root.Open(sub)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// Files is one directory tether keeps in a state directory, read as the
// state directory's own files are (Dir.Files).
type Files struct {
	d   *Dir
	sub string
}

// Files returns the directory sub of d (one of specs, catalogs, groups,
// tokens), for a reader outside this package: the process-group ledger.
func (d *Dir) Files(sub string) Files { return Files{d: d, sub: sub} }

// Path is the directory's path.
func (f Files) Path() string { return filepath.Join(f.d.path, f.sub) }

// ReadDir lists the directory; a missing one is fs.ErrNotExist.
func (f Files) ReadDir() ([]fs.DirEntry, error) { return f.d.list(f.sub) }

// ReadFile reads the file name of the directory: bounded (--max-state-file-size),
// and only a regular file that is tether's user's and not writable by
// group or others; otherwise an error that says why.
func (f Files) ReadFile(name string) ([]byte, error) {
	if name != filepath.Base(name) {
		return nil, fmt.Errorf("%s: not a file name", name)
	}
	return f.d.read(filepath.Join(f.sub, name))
}

// errorReason drops the operation and path of an *fs.PathError, for a
// message that names the file already.
func errorReason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Path returns the directory's path.
func (d *Dir) Path() string { return d.path }

// savedSpec is one file of specs/: the entry's place and the manifest
// document itself, as YAML (JSON being YAML; SaveSpec), so that loading it goes through the same
// decoding, defaulting and validation as a manifest file.
type savedSpec struct {
	Origin   string `json:"origin"`
	Index    int    `json:"index"`
	Dir      string `json:"dir"`
	Manifest string `json:"manifest"`
}

func (d *Dir) specPath(name string) string {
	return filepath.Join(d.path, "specs", name+".json")
}

// SaveSpec keeps e's spec (e.Conn, which must be set) as its last valid one.
// The document is saved as JSON, which is YAML: loading it decodes it as a
// manifest, and rendering it as block YAML cost a YAML parse and emit per
// connection (at 1,000 connections a sixth of what tether allocates while
// they start, hack/bench -pprof) for a file no one reads by hand. A spec
// saved as block YAML by an earlier tether loads the same way.
//
// Loading decodes the document as a manifest file, so within
// spec.MaxFileSize. JSON escapes what YAML need not (each '"' and '\' of
// a value doubles, with HTML escaping '<', '>' and '&' would be six bytes):
// a document whose JSON is over the limit is saved as block YAML, as
// before, and one that is over it either way is an error, not a file that
// would be ignored at the next start.
func (d *Dir) SaveSpec(e desired.Entry) error {
	doc, err := specDocument(e.Conn)
	if err != nil {
		return fmt.Errorf("state: spec of %s: %w", e.Name, err)
	}
	data, err := json.Marshal(savedSpec{Origin: e.Origin, Index: e.Index, Dir: e.Dir, Manifest: string(doc)})
	if err != nil {
		return fmt.Errorf("state: spec of %s: %w", e.Name, err)
	}
	if err := atomicfile.Write(d.specPath(e.Name), data, 0o600, 0o700); err != nil {
		return fmt.Errorf("state: saving the spec of %s: %w", e.Name, err)
	}
	return nil
}

// specDocument is the manifest document SaveSpec keeps for c: its JSON, or
// its block YAML where the JSON would be over spec.MaxFileSize.
func specDocument(c *spec.McpConnection) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	if buf.Len() <= spec.MaxFileSize {
		return buf.Bytes(), nil
	}
	doc, err := spec.RenderYAML(c)
	if err != nil {
		return nil, err
	}
	if len(doc) > spec.MaxFileSize {
		return nil, fmt.Errorf("its document is %d bytes as JSON and %d as YAML, over the limit of %d a manifest may have, so it could not be loaded back", buf.Len(), len(doc), spec.MaxFileSize)
	}
	return doc, nil
}

// DeleteSpec forgets name's spec (its connection is gone).
func (d *Dir) DeleteSpec(name string) error {
	if err := os.Remove(d.specPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state: forgetting the spec of %s: %w", name, err)
	}
	return nil
}

// LoadSpecs reads every saved spec. Each file that cannot be used is
// skipped and reported in problems (one error each, naming the file).
func (d *Dir) LoadSpecs() (entries map[string]desired.Entry, problems []error) {
	entries = map[string]desired.Entry{}
	dir := filepath.Join(d.path, "specs")
	list, err := d.list("specs")
	if errors.Is(err, fs.ErrNotExist) {
		return entries, nil
	}
	if err != nil {
		return entries, []error{fmt.Errorf("state: %w", err)}
	}
	for _, f := range list {
		name, ok := strings.CutSuffix(f.Name(), ".json")
		if !ok || !f.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, f.Name())
		e, err := d.loadSpec(path, filepath.Join("specs", f.Name()), name)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: ignored: %w", path, err))
			continue
		}
		entries[name] = e
	}
	return entries, problems
}

func (d *Dir) loadSpec(path, rel, name string) (desired.Entry, error) {
	data, err := d.read(rel)
	if err != nil {
		return desired.Entry{}, errorReason(err)
	}
	var s savedSpec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return desired.Entry{}, fmt.Errorf("not a saved spec: %w", err)
	}
	docs := spec.DecodeFile(path, []byte(s.Manifest))
	if len(docs) != 1 || docs[0].Conn == nil {
		return desired.Entry{}, errors.New("its manifest does not decode")
	}
	if docs[0].Name != name {
		return desired.Entry{}, fmt.Errorf("it holds the spec of %q", docs[0].Name)
	}
	return desired.Entry{Name: name, Origin: s.Origin, Index: s.Index, Dir: s.Dir, Conn: docs[0].Conn}, nil
}

func (d *Dir) catalogPath(name string) string {
	return filepath.Join(d.path, "catalogs", name+".json")
}

// SaveCatalog keeps what name's server publishes. A catalog larger than a
// state file may be read (--max-state-file-size) is not written: the next
// start would ignore it (LoadCatalog). The one saved before is removed
// then, since it is no longer what the server publishes: with none, the
// next start learns the catalog from the server (docs/contract.md §2,
// OnDemand). The error wraps a *catalog.TooLargeError, but not when the
// one saved before could not be removed: that is a failure to try again,
// or the next start would serve it.
func (d *Dir) SaveCatalog(name string, c *catalog.Catalog) error {
	data, err := c.Marshal()
	if err != nil {
		return fmt.Errorf("state: catalog of %s: %w", name, err)
	}
	if size := int64(len(data)); size > d.maxFile {
		tooLarge := &catalog.TooLargeError{Size: size, Limit: d.maxFile}
		if err := os.Remove(d.catalogPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("state: not saving the catalog of %s: %v; removing the one saved before: %w", name, tooLarge, err)
		}
		return fmt.Errorf("state: not saving the catalog of %s (none kept: the next start learns it from the server): %w", name, tooLarge)
	}
	if err := atomicfile.Write(d.catalogPath(name), data, 0o600, 0o700); err != nil {
		return fmt.Errorf("state: saving the catalog of %s: %w", name, err)
	}
	return nil
}

// LoadCatalog returns the catalog saved for name: (nil, nil) when there is
// none, an error naming the file when it cannot be used (corrupt, foreign).
func (d *Dir) LoadCatalog(name string) (*catalog.Catalog, error) {
	path := d.catalogPath(name)
	data, err := d.read(filepath.Join("catalogs", name+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: ignored: %w", path, errorReason(err))
	}
	c, err := catalog.Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("%s: ignored: %w", path, err)
	}
	return c, nil
}

// DeleteCatalog forgets name's catalog (its connection is gone).
func (d *Dir) DeleteCatalog(name string) error {
	if err := os.Remove(d.catalogPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state: forgetting the catalog of %s: %w", name, err)
	}
	return nil
}
