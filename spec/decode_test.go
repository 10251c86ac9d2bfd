package spec

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// describeDocuments renders DecodeFile's answer for a golden file: one line
// per document, then its problems, or the defaulted connection as JSON.
func describeDocuments(docs []Document) string {
	var b strings.Builder
	for _, d := range docs {
		if d.Conn != nil {
			conn, err := json.Marshal(d.Conn)
			if err != nil {
				panic(err)
			}
			fmt.Fprintf(&b, "document %d (line %d) %q: valid, transport %s\n  hash %s\n  connectHash %s\n  %s\n",
				d.Index+1, d.Line, d.Name, d.Conn.Spec.TransportName(), d.Conn.Spec.Hash(), d.Conn.Spec.ConnectHash(), conn)
			continue
		}
		plural := "s"
		if len(d.Errors) == 1 {
			plural = ""
		}
		fmt.Fprintf(&b, "document %d (line %d) %q: %d problem%s\n", d.Index+1, d.Line, d.Name, len(d.Errors), plural)
		for _, e := range d.Errors {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	return b.String()
}

// TestDecodeFileGolden decodes each testdata/decode/*.yaml and compares the
// documents, problems, defaulted objects and hashes with its .golden file.
// Run with -update to rewrite them, then read the diff.
func TestDecodeFileGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/decode/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got := describeDocuments(DecodeFile(filepath.Base(f), data))
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./spec -run Golden -update)", err)
			}
			if got != string(want) {
				t.Errorf("DecodeFile(%s) differs from %s:\n--- got\n%s--- want\n%s", f, golden, got, want)
			}
		})
	}
}

// TestHashIgnoresSpelling checks that the same spec written differently
// (key order, flow style, quoting, comments, duration spellings, defaults
// written out or not) hashes the same.
func TestHashIgnoresSpelling(t *testing.T) {
	a := decodeValid(t, "testdata/decode/full.yaml")[0]
	b := decodeValid(t, "testdata/decode/same-spec-other-spelling.yaml")[0]
	if a.Spec.Hash() != b.Spec.Hash() {
		t.Errorf("Hash differs: %s vs %s", a.Spec.Hash(), b.Spec.Hash())
	}
	if a.Spec.ConnectHash() != b.Spec.ConnectHash() {
		t.Errorf("ConnectHash differs: %s vs %s", a.Spec.ConnectHash(), b.Spec.ConnectHash())
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("defaulted objects differ:\n%+v\n%+v", a, b)
	}
}

func decodeValid(t *testing.T, file string) []*McpConnection {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []*McpConnection
	for _, d := range DecodeFile(file, data) {
		if d.Conn == nil {
			t.Fatalf("%s: document %d invalid: %v", file, d.Index+1, d.Errors)
		}
		out = append(out, d.Conn)
	}
	return out
}

// TestAgreesWithSigsYAML decodes the valid test manifests a second way, with
// sigs.k8s.io/yaml's strict decoder (the library the rest of tether uses for
// YAML), and expects the same objects: the hand-written node walker maps
// fields exactly as the json tags say.
func TestAgreesWithSigsYAML(t *testing.T) {
	for _, f := range []string{"full.yaml", "same-spec-other-spelling.yaml", "crlf.yaml", "bom.yaml"} {
		path := filepath.Join("testdata/decode", f)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs := DecodeFile(f, data)
		for i, c := range splitDocuments(data, MaxDocuments) {
			if i >= len(docs) || docs[i].Conn == nil {
				continue // only the valid documents can agree
			}
			var want McpConnection
			if err := sigsyaml.UnmarshalStrict(c.text, &want); err != nil {
				t.Fatalf("%s document %d: sigs.k8s.io/yaml: %v", f, i+1, err)
			}
			want.Default()
			if !reflect.DeepEqual(docs[i].Conn, &want) {
				t.Errorf("%s document %d:\n spec: %+v\n sigs: %+v", f, i+1, docs[i].Conn, &want)
			}
		}
	}
}
