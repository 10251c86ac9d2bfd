package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/tether-mcp/tether/spec"
)

// StatusPath returns where the status of a manifest file is written:
// <manifest-base>.status.yaml beside it, or, with statusDir, the same
// relative place under statusDir.
func StatusPath(root, statusDir, manifest string) string {
	dir, base := filepath.Split(manifest)
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml") + ".status.yaml"
	if statusDir == "" {
		return filepath.Join(dir, base)
	}
	rel, err := filepath.Rel(root, filepath.Join(dir, base))
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = base
	}
	return filepath.Join(statusDir, rel)
}

// StatusWriter owns the status files. It keeps the latest status document of
// every connection, renders each manifest's status file (one document per
// connection, in manifest order), and writes it atomically (temp file +
// rename) only when its bytes change. Its maps have one lock; each status
// file has a lock of its own, held while it is rendered and written, so
// writes of different files run in parallel and writes of one file happen in
// the order their content was decided.
type StatusWriter struct {
	root, statusDir string

	mu       sync.Mutex
	rendered map[string][]byte      // connection name → its rendered document
	files    map[string][]byte      // status path → bytes on disk (nil: absent)
	locks    map[string]*sync.Mutex // status path → its write lock
}

// NewStatusWriter returns a writer for the tree at root.
func NewStatusWriter(root, statusDir string) *StatusWriter {
	return &StatusWriter{
		root:      root,
		statusDir: statusDir,
		rendered:  map[string][]byte{},
		files:     map[string][]byte{},
		locks:     map[string]*sync.Mutex{},
	}
}

// Path returns the status file of a manifest.
func (w *StatusWriter) Path(manifest string) string {
	return StatusPath(w.root, w.statusDir, manifest)
}

// Previous returns the status document of name as found in the status file
// on disk, so that a restarted tether keeps transition times and counters.
func (w *StatusWriter) Previous(manifest, name string) (spec.StatusDocument, bool) {
	data, err := os.ReadFile(w.Path(manifest))
	if err != nil {
		return spec.StatusDocument{}, false
	}
	for _, raw := range splitYAMLDocuments(data) {
		var doc spec.StatusDocument
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			continue
		}
		if doc.Metadata.Name == name {
			return doc, true
		}
	}
	return spec.StatusDocument{}, false
}

// Prune deletes the status files of manifests that are gone, so that a
// manifest removed while tether was not running leaves no status behind
// (tether get would show its connection forever). keep holds the manifest
// files of a full listing. Only files that read as tether status documents
// are removed; nothing is removed while the manifest root cannot be read (a
// mount not there yet is no reason to wipe the status directory). Call it
// before any Put. It returns the files it removed.
func (w *StatusWriter) Prune(keep map[string]bool) ([]string, error) {
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
		base, ok := strings.CutSuffix(d.Name(), ".status.yaml")
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
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 128)
	n, _ := io.ReadFull(f, head)
	return bytes.HasPrefix(head[:n], []byte("apiVersion: "+spec.APIVersion+"\nkind: "+spec.Kind+"\n"))
}

// Put records name's status document and rewrites its manifest's status file
// if that changes it. order lists the file's connections in manifest order.
func (w *StatusWriter) Put(manifest string, order []string, doc spec.StatusDocument) error {
	b := renderStatus(&doc)
	return w.flush(manifest, order, func() { w.rendered[doc.Metadata.Name] = b })
}

// Delete forgets name and rewrites (or removes) its old manifest's status
// file. order lists what the file holds now (possibly nothing).
func (w *StatusWriter) Delete(manifest string, order []string, name string) error {
	return w.flush(manifest, order, func() { delete(w.rendered, name) })
}

// flush applies update to the documents and brings the manifest's status
// file in line with them.
func (w *StatusWriter) flush(manifest string, order []string, update func()) error {
	path := w.Path(manifest)
	w.mu.Lock()
	lock := w.locks[path]
	if lock == nil {
		lock = &sync.Mutex{}
		w.locks[path] = lock
	}
	w.mu.Unlock()
	lock.Lock()
	defer lock.Unlock()

	w.mu.Lock()
	update()
	var buf bytes.Buffer
	for _, name := range order {
		b, ok := w.rendered[name]
		if !ok {
			continue
		}
		if buf.Len() > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	have, known := w.files[path]
	w.mu.Unlock()

	want := buf.Bytes()
	if !known {
		// First touch since start: compare with what a previous run left.
		if b, err := os.ReadFile(path); err == nil {
			have = b
		}
	}
	switch {
	case len(want) == 0 && known && have == nil:
		return nil
	case len(want) == 0:
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing status file: %w", err)
		}
		want = nil
	case have != nil && bytes.Equal(have, want):
	default:
		if err := writeAtomic(path, want); err != nil {
			return err
		}
	}
	w.mu.Lock()
	w.files[path] = want
	w.mu.Unlock()
	return nil
}

// RenderYAML renders v as YAML through its JSON encoding, keeping the
// struct's field order (sigs.k8s.io/yaml would sort keys, which puts
// "attempt" above "phase"): JSON is YAML, so yaml.v3 reads it into a node
// tree in order; block style then makes it read like a hand-written file.
func RenderYAML(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var n yamlv3.Node
	if err := yamlv3.Unmarshal(j, &n); err != nil {
		return nil, err
	}
	blockStyle(&n)
	var buf bytes.Buffer
	enc := yamlv3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func blockStyle(n *yamlv3.Node) {
	if n.Kind == yamlv3.ScalarNode {
		// Keep quotes only where YAML needs them to read the value back as
		// the same string ("True", "2026-…", "").
		if n.Tag == "!!str" {
			n.Style = 0
		}
		return
	}
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// writeAtomic writes data to path via a hidden temp file in the same
// directory and a rename, so a reader sees the old or the new file, never a
// part of one.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	pattern := "." + filepath.Base(path) + ".tmp-*"
	tmp, err := os.CreateTemp(dir, pattern)
	if errors.Is(err, fs.ErrNotExist) {
		// The directory is created only when it is missing (--status-dir
		// trees): at 1,000 connections every syscall of a write counts.
		if err = os.MkdirAll(dir, 0o755); err == nil {
			tmp, err = os.CreateTemp(dir, pattern)
		}
	}
	if err != nil {
		return fmt.Errorf("writing status file: %w", err)
	}
	name := tmp.Name()
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Chmod(0o644) // on the open file: no second path lookup
	}
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(name, path)
	}
	if werr != nil {
		os.Remove(name)
		return fmt.Errorf("writing status file: %w", werr)
	}
	return nil
}

// splitYAMLDocuments splits a multi-document YAML stream on "---" lines.
func splitYAMLDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if t := bytes.TrimRight(line, " \t\r\n"); bytes.Equal(t, []byte("---")) {
			if cur.Len() > 0 {
				docs = append(docs, append([]byte(nil), cur.Bytes()...))
			}
			cur.Reset()
			continue
		}
		cur.Write(line)
	}
	if len(bytes.TrimSpace(cur.Bytes())) > 0 {
		docs = append(docs, cur.Bytes())
	}
	return docs
}
