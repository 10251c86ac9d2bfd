package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSchemagenUpToDate fails when spec's types changed and the checked-in
// schemas were not generated again.
func TestSchemagenUpToDate(t *testing.T) {
	const dir = "../../spec"
	files, err := Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("spec/%s is not what schemagen generates from spec's types: run hack/update-generated.sh", name)
		}
	}
}

// generate runs Generate on a package made of src.
func generate(t *testing.T, src string) (map[string]any, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "types.go"), []byte("package spec\n\n"+src), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := Generate(dir)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(files[ManifestFile], &m); err != nil {
		t.Fatalf("the output is not JSON: %v", err)
	}
	return m, nil
}

// roots declares the two root types around a Spec the case defines.
const roots = `
// McpConnection is a test root.
//
// A second paragraph is for Go readers only.
type McpConnection struct {
	// The spec.
	Spec Spec ` + "`json:\"spec\"`" + `
}

// StatusDocument is a test root.
type StatusDocument struct {
	// The phase.
	Phase Phase ` + "`json:\"phase\"`" + `
}

// Phase is a test enum.
type Phase string

const (
	PhaseA Phase = "A"
	PhaseB Phase = "B"
	other        = "not a Phase"
)
`

func TestSchemagenMapping(t *testing.T) {
	m, err := generate(t, roots+`
// Spec has one field of each kind.
//
// +tether:exactlyOneOf=a;b
type Spec struct {
	// A string
	// on two lines.
	//
	// A second paragraph.
	// +tether:minLength=1
	A string `+"`json:\"a,omitempty\"`"+`
	// An object.
	B *Sub `+"`json:\"b,omitempty\"`"+`
	// A required integer.
	// +tether:minimum=2
	N int `+"`json:\"n\"`"+`
	// An enum.
	// +tether:enum=x;y
	// +tether:pattern=^[xy]$
	// +tether:patternMessage=x or y.
	E string `+"`json:\"e,omitempty\"`"+`
	// Skipped.
	Skip string `+"`json:\"-\"`"+`
	unexported string
}

// Sub is a nested object.
type Sub struct {
	// A map.
	M map[string]string `+"`json:\"m\"`"+`
}
`)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(m)
	for _, want := range []string{
		`"$schema":"https://json-schema.org/draft/2020-12/schema"`,
		`"description":"McpConnection is a test root."`,
		`"a":{"description":"A string on two lines.\n\nA second paragraph.","minLength":1,"type":["string","null"]}`,
		`"b":{"additionalProperties":false,"description":"An object.","properties":{"m":{"additionalProperties":{"type":"string"},"description":"A map.","type":["object","null"]}},"type":["object","null"]}`,
		`"n":{"description":"A required integer.","minimum":2,"type":"integer"}`,
		`"e":{"description":"An enum.","enum":["x","y",null],"pattern":"^[xy]$","patternErrorMessage":"x or y.","type":["string","null"]}`,
		`"required":["n"]`,
		`"oneOf":[{"properties":{"a":{"minLength":1,"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"object"}},"required":["b"]}]`,
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("schema lacks %s\nschema: %s", want, got)
		}
	}
	if strings.Contains(string(got), "Skip") || strings.Contains(string(got), "unexported") {
		t.Errorf("schema has a field it should skip: %s", got)
	}
}

func TestSchemagenEnumFromConstants(t *testing.T) {
	dir := t.TempDir()
	src := "package spec\n\n" + roots + "\n// Spec is empty.\ntype Spec struct{}\n"
	if err := os.WriteFile(filepath.Join(dir, "types.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := json.Compact(&got, files[StatusFile]); err != nil {
		t.Fatal(err)
	}
	if want := `"phase":{"description":"The phase.","type":"string","enum":["A","B"]}`; !strings.Contains(got.String(), want) {
		t.Errorf("status schema lacks %s\nschema: %s", want, got.String())
	}
}

// TestSchemagenErrors: what the generator refuses names the file, the line
// and what is wrong.
func TestSchemagenErrors(t *testing.T) {
	tests := []struct {
		name, src string
		line      int // of the problem in src; 0: not checked
		want      string
	}{
		{"field without doc", "// Spec.\ntype Spec struct {\n\tA string `json:\"a\"`\n}\n",
			3, "field Spec.A has no doc comment"},
		{"field without json tag", "// Spec.\ntype Spec struct {\n\t// A.\n\tA string\n}\n",
			4, "field Spec.A has no json tag"},
		{"unknown field marker", "// Spec.\ntype Spec struct {\n\t// A.\n\t// +tether:format=uri\n\tA string `json:\"a\"`\n}\n",
			4, "unknown marker +tether:format on Spec.A"},
		{"enum on an integer", "// Spec.\ntype Spec struct {\n\t// A.\n\t// +tether:enum=1;2\n\tA int `json:\"a\"`\n}\n",
			4, "+tether:enum on Spec.A, which is not a string"},
		{"minimum on a string", "// Spec.\ntype Spec struct {\n\t// A.\n\t// +tether:minimum=1\n\tA string `json:\"a\"`\n}\n",
			4, "+tether:minimum on Spec.A, which is not an integer"},
		{"bad pattern", "// Spec.\ntype Spec struct {\n\t// A.\n\t// +tether:pattern=^(a$\n\tA string `json:\"a\"`\n}\n",
			4, "+tether:pattern on Spec.A: error parsing regexp"},
		{"patternMessage without a pattern", "// Spec.\ntype Spec struct {\n\t// A.\n\t// +tether:patternMessage=no\n\tA string `json:\"a\"`\n}\n",
			4, "+tether:patternMessage on Spec.A, which has no pattern"},
		{"exactlyOneOf of an unknown field", "// Spec.\n// +tether:exactlyOneOf=a;c\ntype Spec struct {\n\t// A.\n\tA *string `json:\"a,omitempty\"`\n}\n",
			3, `+tether:exactlyOneOf on Spec names "c", which is not one of its fields`},
		{"exactlyOneOf of a required field", "// Spec.\n// +tether:exactlyOneOf=a;b\ntype Spec struct {\n\t// A.\n\tA string `json:\"a\"`\n\t// B.\n\tB string `json:\"b,omitempty\"`\n}\n",
			3, `+tether:exactlyOneOf on Spec names "a", which is required`},
		{"embedded field", "// Spec.\ntype Spec struct {\n\tSub\n}\n\n// Sub.\ntype Sub struct{}\n",
			3, "Spec: embedded fields are not supported"},
		{"recursive type", "// Spec.\ntype Spec struct {\n\t// Next.\n\tNext *Spec `json:\"next,omitempty\"`\n}\n",
			2, "type Spec refers to itself"},
		{"unsupported type", "// Spec.\ntype Spec struct {\n\t// F.\n\tF float32 `json:\"f\"`\n}\n",
			4, "unsupported type float32"},
	}
	base := strings.Count("package spec\n\n"+roots, "\n")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := generate(t, roots+tt.src)
			want := fmt.Sprintf("/types.go:%d: %s", base+tt.line, tt.want)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want one containing %q", err, want)
			}
		})
	}
}
