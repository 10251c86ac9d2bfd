package manifest

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/tether-mcp/tether/controller/boundedfile"
	"github.com/tether-mcp/tether/spec"
)

// ListFiles lists the manifest files under root and reads each, as the
// Source of tether run does at every listing: the input of Resolve. tether
// diff reads a tree with it, so a tree is read by one set of rules.
func ListFiles(root string) ([]File, Tree, error) { return ListFilesAs(root, root) }

// ListFilesAs is ListFiles for a copy of a tree: it lists and reads root,
// and names every file (in Files and in their problems) as if root were
// as. tether diff reads a git revision that way, from a copy of the
// revision's tree, in the names of the working tree.
func ListFilesAs(root, as string) ([]File, Tree, error) {
	tree, err := ListTree(root)
	if err != nil {
		return nil, tree, err
	}
	rename := func(p string) string {
		if rel, err := filepath.Rel(root, p); err == nil {
			return filepath.Join(as, rel)
		}
		return p
	}
	names := make([]string, len(tree.Files))
	read := make(map[string]string, len(tree.Files))
	for i, p := range tree.Files {
		names[i] = rename(p)
		read[names[i]] = p
	}
	return loadFiles(names, func(name string) File { return LoadFileAs(read[name], name) }), tree, nil
}

// loadFiles reads the listed paths with load, refusing the second of
// x.yaml and x.yml (both would write x.status.yaml).
func loadFiles(paths []string, load func(path string) File) []File {
	files := make([]File, 0, len(paths))
	statusOwners := StatusOwners{}
	for _, path := range paths {
		if err := statusOwners.Claim(path); err != nil {
			files = append(files, File{Path: path, Err: fmt.Errorf("%s: %w", path, err)})
			continue
		}
		files = append(files, load(path))
	}
	return files
}

// LoadFile reads and decodes one manifest file as tether run does: bounded
// by spec.MaxFileSize, a secretKeyRef refused (tether run --dir has no
// Secrets to read).
func LoadFile(path string) File { return LoadFileAs(path, path) }

// LoadFileAs is LoadFile reading path and naming the file name.
func LoadFileAs(path, name string) File {
	data, bad := readManifest(path, name)
	if bad != nil {
		return *bad
	}
	return File{Path: name, Docs: DecodeData(name, data)}
}

// DecodeData decodes a manifest file's bytes as tether run --dir does.
func DecodeData(path string, data []byte) []spec.Document {
	return RejectSecretKeyRefs(path, spec.DecodeFile(path, data))
}

// readManifest reads path bounded by spec.MaxFileSize: its bytes, or the
// File that says why they cannot be used (an oversized file is reported
// with its size, without reading it).
func readManifest(path, name string) ([]byte, *File) {
	data, _, err := boundedfile.Read(path, spec.MaxFileSize)
	var tooLarge *boundedfile.TooLargeError
	if errors.As(err, &tooLarge) {
		return nil, &File{Path: name, Docs: spec.OversizedFile(name, tooLarge.Size)}
	}
	if err != nil {
		return nil, &File{Path: name, Err: fmt.Errorf("%s: %w", name, ErrorReason(err))}
	}
	return data, nil
}
