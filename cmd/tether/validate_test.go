//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func init() {
	// Another test file of this package may define -update too.
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files in testdata")
	}
}

func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// runValidate runs `tether validate args...` and returns its exit code,
// stdout and stderr.
func runValidate(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"validate"}, args...))
	err := root.Execute()
	switch ec := exitCode(0); {
	case err == nil:
	case asExitCode(err, &ec):
		code = int(ec)
	default:
		t.Fatalf("validate %v: unexpected error %v", args, err)
	}
	return code, out.String(), errOut.String()
}

func TestValidateGolden(t *testing.T) {
	const dir = "testdata/validate"
	tests := []struct {
		name     string
		args     []string
		wantCode int
	}{
		{"valid-tree", []string{dir + "/valid"}, 0},
		{"file-with-any-name", []string{dir + "/manifest.txt"}, 0},
		{"later-document-invalid", []string{dir + "/invalid/later.yaml"}, 1},
		{"several-problems", []string{dir + "/invalid/several.yaml"}, 1},
		{"invalid-tree", []string{dir + "/invalid"}, 1},
		{"duplicate-across-files", []string{dir + "/dup"}, 1},
		{"mixed-paths", []string{dir + "/valid", dir + "/valid/a.yaml", dir + "/missing.yaml", dir + "/invalid/later.yaml"}, 1},
		{"json-invalid", []string{"-o", "json", dir + "/invalid", dir + "/missing.yaml"}, 1},
		{"json-valid", []string{"-o", "json", dir + "/valid"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runValidate(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout, stderr)
			}
			got := "$ tether validate " + strings.Join(tt.args, " ") + "\n--- stdout\n" + stdout + "--- stderr\n" + stderr
			golden := filepath.Join(dir, tt.name+".golden")
			if updateGolden() {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./cmd/tether -run TestValidateGolden -update)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

// TestValidateJSONShape decodes the JSON output strictly into the documented
// shape, so a renamed or dropped key fails here, not in someone's script.
func TestValidateJSONShape(t *testing.T) {
	code, stdout, stderr := runValidate(t, "-o", "json", "testdata/validate/invalid/later.yaml")
	if code != 1 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var r struct {
		Valid     *bool `json:"valid"`
		Files     *int  `json:"files"`
		Documents *int  `json:"documents"`
		Errors    []struct {
			File         *string `json:"file"`
			Document     *int    `json:"document"`
			DocumentLine *int    `json:"documentLine"`
			Line         *int    `json:"line"`
			Field        *string `json:"field"`
			Message      *string `json:"message"`
		} `json:"errors"`
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decode %s: %v", stdout, err)
	}
	if r.Valid == nil || *r.Valid || r.Files == nil || *r.Files != 1 || r.Documents == nil || *r.Documents != 2 || len(r.Errors) != 1 {
		t.Fatalf("report = %s", stdout)
	}
	e := r.Errors[0]
	if e.File == nil || *e.File != "testdata/validate/invalid/later.yaml" || e.Document == nil || *e.Document != 2 ||
		e.DocumentLine == nil || *e.DocumentLine != 5 || e.Line == nil || *e.Line != 12 ||
		e.Field == nil || *e.Field != "spec.healthCheck.interval" || e.Message == nil || !strings.HasPrefix(*e.Message, `invalid duration "3x"`) {
		t.Errorf("error = %s", stdout)
	}
	code, stdout, _ = runValidate(t, "-o", "json", "testdata/validate/valid")
	if code != 0 || !strings.Contains(stdout, `"errors": []`) {
		t.Errorf("a valid run must print an empty errors list, got exit %d: %s", code, stdout)
	}
}

func TestValidateSecretsNotShown(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		_, stdout, stderr := runValidate(t, "-o", format, "testdata/validate/invalid/several.yaml")
		if strings.Contains(stdout+stderr, "not-shown") {
			t.Errorf("-o %s shows a header value:\n%s%s", format, stdout, stderr)
		}
	}
}

// TestValidateHostileFiles checks that the command answers with an error,
// not a hang or a crash, for a huge file, binary junk, a device and an
// empty directory.
func TestValidateHostileFiles(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.yaml")
	if err := os.WriteFile(huge, bytes.Repeat([]byte("# padding\n"), 300_000), 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.yaml")
	if err := os.WriteFile(junk, []byte("\x00\x01\x02\xff\xfe"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		wantCode   int
		wantErr    string
	}{
		{"huge", huge, 1, huge + ": file is 3000000 bytes, over the limit of 1048576\n"},
		{"junk", junk, 1, junk + ":1: not a text file: NUL byte (binary or UTF-16 content)\n"},
		{"device", os.DevNull, 1, os.DevNull + ": cannot read: not a regular file (a device)\n"},
		{"empty directory", empty, 0, "warning: " + empty + ": no manifests found\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runValidate(t, tt.path)
			if code != tt.wantCode || !strings.HasPrefix(stderr, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr starting %q", code, stderr, tt.wantCode, tt.wantErr)
			}
		})
	}
}

func TestValidateRejectsUnknownFormat(t *testing.T) {
	root := newRootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"validate", "-o", "yaml", "testdata/validate/valid"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), `unknown output format "yaml"`) {
		t.Errorf("err = %v", err)
	}
}

// TestValidateStatusFileClash: validate agrees with tether run that x.yaml
// and x.yml cannot live side by side (they would share x.status.yaml).
func TestValidateStatusFileClash(t *testing.T) {
	dir := t.TempDir()
	m := "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: %s\nspec:\n  stdio:\n    command: srv\n"
	writeFile(t, filepath.Join(dir, "x.yaml"), fmt.Sprintf(m, "first"))
	writeFile(t, filepath.Join(dir, "x.yml"), fmt.Sprintf(m, "second"))
	v := validatePaths([]string{dir})
	if v.valid() || len(v.problems) != 1 || !strings.Contains(v.problems[0].Error(), "x.yml: its status file x.status.yaml would be x.yaml's too") {
		t.Errorf("problems = %v", v.problems)
	}
}

// TestValidateExamplesTree: `tether validate examples`, the README's
// command, finds every manifest valid; the tree's other YAML (Prometheus
// rules, Kubernetes objects, the Helm chart) is kept out by
// examples/.tetherignore.
func TestValidateExamplesTree(t *testing.T) {
	out := runCommand(t, "validate", filepath.Join("..", "..", "examples"))
	if !strings.Contains(string(out), "all valid") {
		t.Errorf("tether validate examples: %s", out)
	}
}
