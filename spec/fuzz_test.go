package spec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// FuzzDecodeFile checks DecodeFile's invariants on any input: it returns
// (no panic, no hang), every problem names the file on one line, a document
// is valid exactly when it has no problems, a valid document re-encoded
// as JSON (which is YAML) decodes to the same hashes, and the schema
// (Schema) accepts every valid document, as written and as re-encoded.
//
// The seed corpus is testdata/fuzz/FuzzDecodeFile plus testdata/decode.
// Run: go test ./spec -run '^$' -fuzz FuzzDecodeFile -fuzztime 3m -parallel 1
func FuzzDecodeFile(f *testing.F) {
	files, _ := filepath.Glob("testdata/decode/*.yaml")
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	rs := resolvedSchema(f, Schema())
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "fuzz.yaml"
		docs := DecodeFile(file, data)
		js := jsonDocuments(data)
		if again := DecodeFile(file, data); !reflect.DeepEqual(docs, again) {
			t.Fatalf("DecodeFile is not deterministic")
		}
		for i, d := range docs {
			if d.Index == -1 {
				if len(docs) != 1 || len(d.Errors) != 1 || d.Conn != nil {
					t.Fatalf("a whole-file problem must be the only document with one error: %+v", docs)
				}
			} else if d.Index != i || d.Line < 1 {
				t.Fatalf("document %d has Index %d, Line %d", i, d.Index, d.Line)
			}
			if (d.Conn == nil) == (len(d.Errors) == 0) {
				t.Fatalf("document %d: Conn %v with %d errors", i, d.Conn, len(d.Errors))
			}
			for _, e := range d.Errors {
				msg := e.Error()
				if e.File != file || !strings.HasPrefix(msg, file+":") || e.Index != d.Index {
					t.Fatalf("error does not name its file and document: %+v %q", e, msg)
				}
				if strings.ContainsAny(msg, "\r\n") || e.Msg == "" {
					t.Fatalf("error is not one non-empty line: %q", msg)
				}
				if e.Index >= 0 && (e.Line < 1 || e.DocLine != d.Line) {
					t.Fatalf("error lines: %+v in document at line %d", e, d.Line)
				}
			}
			if d.Conn != nil {
				checkRoundTrip(t, d.Conn, rs)
				checkSchemaAccepts(t, rs, js, docs, i)
			}
		}
	})
}

// checkRoundTrip re-encodes a valid connection and decodes it again.
func checkRoundTrip(t *testing.T, c *McpConnection, rs *jsonschema.Resolved) {
	t.Helper()
	hash, connectHash := c.Spec.Hash(), c.Spec.ConnectHash()
	if c.Spec.Hash() != hash {
		t.Fatalf("Hash is not stable")
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("marshal a valid connection: %v", err)
	}
	if len(b) > MaxFileSize {
		return // aliases can expand a valid document past the limit
	}
	docs := DecodeFile("roundtrip.yaml", b)
	if len(docs) != 1 || docs[0].Conn == nil {
		t.Fatalf("re-encoded connection does not decode: %s: %v", b, docs)
	}
	got := docs[0].Conn
	if got.Spec.Hash() != hash || got.Spec.ConnectHash() != connectHash || got.Metadata.Name != c.Metadata.Name {
		t.Fatalf("round trip changed the connection:\n%s\n%+v", b, got)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if err := rs.Validate(v); err != nil {
		t.Fatalf("the schema rejects a valid connection, defaulted and re-encoded: %s: %v", b, err)
	}
}

// checkSchemaAccepts: the schema accepts document i, which is valid.
func checkSchemaAccepts(t *testing.T, rs *jsonschema.Resolved, js []jsonDocument, docs []Document, i int) {
	t.Helper()
	if len(js) != len(docs) {
		t.Fatalf("%d documents as JSON, %d for DecodeFile", len(js), len(docs))
	}
	if !js[i].ok {
		t.Fatalf("document %d is valid but not JSON", i+1)
	}
	if err := rs.Validate(js[i].value); err != nil {
		t.Fatalf("document %d is valid, the schema rejects it: %v", i+1, err)
	}
}
