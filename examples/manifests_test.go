// Package examples holds no code: its test checks that the example manifests
// stay valid, keep their names unique, and that the tree `make run` loads
// needs nothing from the network.
package examples

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/spec"
)

// manifestTrees are the example directories that hold manifests. The others
// (server, systemd, …) hold no McpConnection YAML.
var manifestTrees = []string{"manifests", "more", "kubernetes/connections"}

// defaultTree is what `make run` loads.
const defaultTree = "manifests"

type decoded struct {
	file string
	doc  spec.Document
}

func decodeTree(t *testing.T, root string) []decoded {
	t.Helper()
	var out []decoded
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() || strings.HasPrefix(name, ".") || strings.Contains(name, ".status.") ||
			!(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range spec.DecodeFile(path, data) {
			out = append(out, decoded{path, doc})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no manifests found under %s", root)
	}
	return out
}

func TestExampleManifestsAreValid(t *testing.T) {
	names := map[string]string{} // name → file, across every tree
	for _, tree := range manifestTrees {
		for _, d := range decodeTree(t, tree) {
			for _, err := range d.doc.Errors {
				t.Errorf("%v", err)
			}
			if d.doc.Conn == nil {
				continue
			}
			name := d.doc.Conn.Metadata.Name
			if prev, ok := names[name]; ok {
				t.Errorf("%s: name %q is also used in %s", d.file, name, prev)
			}
			names[name] = d.file
		}
	}
}

// TestDefaultTreeRunsOffline keeps `make run` self-contained: every
// connection it starts runs a binary that `make build` puts in bin/.
func TestDefaultTreeRunsOffline(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join("..", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	active := 0
	for _, d := range decodeTree(t, defaultTree) {
		c := d.doc.Conn
		if c == nil || c.Spec.Suspend {
			continue // invalid ones fail the test above; suspended ones start nothing
		}
		active++
		if c.Spec.Stdio == nil {
			t.Errorf("%s: %s is active and not stdio: it would need a server that make run does not start", d.file, c.Metadata.Name)
			continue
		}
		cmd := c.Spec.Stdio.Command
		if filepath.IsAbs(cmd) || !strings.Contains(cmd, "/") {
			t.Errorf("%s: %s runs %q: want a path relative to the manifest, into bin/", d.file, c.Metadata.Name, cmd)
			continue
		}
		resolved, err := filepath.Abs(filepath.Join(filepath.Dir(d.file), cmd))
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(resolved) != bin {
			t.Errorf("%s: %s runs %s, which is not in bin/ (%s)", d.file, c.Metadata.Name, resolved, bin)
		}
	}
	if active == 0 {
		t.Error("make run would start no connection")
	}
}

// TestRelativeCommandsStayInRepository: a relative command is resolved
// against its manifest's directory; it must point into this repository.
func TestRelativeCommandsStayInRepository(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tree := range manifestTrees {
		for _, d := range decodeTree(t, tree) {
			c := d.doc.Conn
			if c == nil || c.Spec.Stdio == nil {
				continue
			}
			cmd := c.Spec.Stdio.Command
			if filepath.IsAbs(cmd) || !strings.Contains(cmd, "/") {
				continue
			}
			resolved, err := filepath.Abs(filepath.Join(filepath.Dir(d.file), cmd))
			if err != nil {
				t.Fatal(err)
			}
			if rel, err := filepath.Rel(root, resolved); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s: %s runs %s, outside the repository", d.file, c.Metadata.Name, resolved)
			}
		}
	}
}

// schemaFile is the manifest's JSON Schema that `tether schema` prints, kept
// in sync by hack/update-generated.sh.
const schemaFile = "schema/mcpconnection.schema.json"

var modeline = regexp.MustCompile(`^#\s+yaml-language-server:\s*\$schema=(\S+)`)

// TestExampleManifestsNameTheSchema: every document of every example
// manifest starts with the yaml-language-server line that names the schema,
// so an editor completes and checks it. yaml-language-server reads the line
// from each document's leading comments only, so a file of several
// documents repeats it after each "---".
func TestExampleManifestsNameTheSchema(t *testing.T) {
	want, err := filepath.Abs(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(want); err != nil {
		t.Fatalf("the schema the examples name: %v", err)
	}
	for _, tree := range manifestTrees {
		seen := map[string]bool{}
		for _, d := range decodeTree(t, tree) {
			if seen[d.file] {
				continue
			}
			seen[d.file] = true
			data, err := os.ReadFile(d.file)
			if err != nil {
				t.Fatal(err)
			}
			for i, header := range documentHeaders(string(data)) {
				var ref string
				for _, line := range header {
					if m := modeline.FindStringSubmatch(line); m != nil {
						ref = m[1]
					}
				}
				if ref == "" {
					t.Errorf("%s: document %d has no '# yaml-language-server: $schema=' line before its content", d.file, i+1)
					continue
				}
				got, err := filepath.Abs(filepath.Join(filepath.Dir(d.file), ref))
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("%s: document %d names %s, want the path of examples/%s", d.file, i+1, ref, schemaFile)
				}
			}
		}
	}
}

// documentHeaders returns, for each document of a YAML stream that has
// content, the comment lines before its first content line.
func documentHeaders(data string) [][]string {
	var out [][]string
	var cur []string
	inHeader := true
	for _, line := range strings.Split(data, "\n") {
		switch {
		case strings.HasPrefix(line, "---"):
			cur, inHeader = nil, true
		case !inHeader:
		case strings.HasPrefix(strings.TrimSpace(line), "#"):
			cur = append(cur, line)
		case strings.TrimSpace(line) != "":
			out = append(out, cur)
			inHeader = false
		}
	}
	return out
}
