package spec

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestHostileInput feeds input meant to make a decoder slow, huge or crash.
// Each must answer with an error (or, for the large valid files, a result)
// quickly: the bound is generous for -race on a busy machine, the point is
// that nothing is exponential or hangs.
func TestHostileInput(t *testing.T) {
	laughs := func(key string) string {
		var b strings.Builder
		b.WriteString("apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: {name: lol}\n")
		b.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
		for i := 1; i < 10; i++ {
			fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
		}
		fmt.Fprintf(&b, "spec: {stdio: {command: srv, %s: *a9}}\n", key)
		return b.String()
	}
	manyDocs := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "---\napiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: {name: c%d}\nspec: {stdio: {command: srv}}\n", i)
		}
		return b.String()
	}
	bigArgs := withSpec("stdio:\n  command: srv\n  args:\n" + strings.Repeat("    - aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", (MaxFileSize-300)/41))
	tests := []struct {
		name      string
		in        string
		wantDocs  int    // number of documents returned
		wantValid int    // how many of them are valid
		wantErr   string // a substring of the first error, if any
	}{
		{name: "billion laughs in unknown fields and args", in: laughs("args"), wantDocs: 1,
			wantErr: "a0: unknown field"},
		{name: "billion laughs in env", in: laughs("env"), wantDocs: 1, wantErr: "a0: unknown field"},
		{name: "alias cycle", in: "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: &m {name: x, labels: *m}\nspec: &s {stdio: *s}\n", wantDocs: 1,
			wantErr: "metadata.labels.labels: expected a string, got a mapping"},
		{name: "deep flow nesting", in: "spec: " + strings.Repeat("[", 20000) + "\n", wantDocs: 1,
			wantErr: "invalid YAML: exceeded max depth of 10000"},
		{name: "deep block nesting", in: strings.Repeat("- ", 20000) + "x\n", wantDocs: 1,
			wantErr: "invalid YAML: exceeded max depth of 10000"},
		{name: "over the size limit", in: strings.Repeat("# padding\n", MaxFileSize/10+1), wantDocs: 1,
			wantErr: "big.yaml: file is 1048580 bytes, over the limit of 1048576"},
		{name: "at the size limit, comments only", in: strings.Repeat("#", MaxFileSize), wantDocs: 0},
		{name: "large valid file", in: bigArgs, wantDocs: 1, wantValid: 1},
		{name: "binary junk", in: "\x7fELF\x02\x01\x01\x00\x00\x00", wantDocs: 1,
			wantErr: "big.yaml:1: not a text file: NUL byte (binary or UTF-16 content)"},
		{name: "UTF-16", in: "\xff\xfea\x00p\x00i\x00", wantDocs: 1,
			wantErr: "big.yaml:1: not a text file: NUL byte (binary or UTF-16 content)"},
		{name: "invalid UTF-8 on line 3", in: "a: 1\nb: 2\nc: \xc3\x28\n", wantDocs: 1,
			wantErr: "big.yaml:3: not UTF-8 text: invalid byte sequence"},
		{name: "control character", in: withSpec("stdio: {command: \"a\x01\"}"), wantDocs: 1,
			wantErr: "invalid YAML: control characters are not allowed"},
		{name: "the most documents", in: manyDocs(MaxDocuments), wantDocs: MaxDocuments, wantValid: MaxDocuments},
		{name: "too many documents", in: manyDocs(MaxDocuments + 1), wantDocs: 1,
			wantErr: "big.yaml: file holds more than 1000 documents"},
		{name: "markers only", in: strings.Repeat("---\n", MaxFileSize/4), wantDocs: 1,
			wantErr: "big.yaml: file holds more than 1000 documents"},
		{name: "many problems in one document", in: withSpec(stdio1000UnknownFields()), wantDocs: 1,
			wantErr: "spec.f0: unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			docs := DecodeFile("big.yaml", []byte(tt.in))
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
			valid := 0
			for _, d := range docs {
				if d.Conn != nil {
					valid++
				}
			}
			if len(docs) != tt.wantDocs || valid != tt.wantValid {
				t.Fatalf("got %d documents, %d valid; want %d, %d", len(docs), valid, tt.wantDocs, tt.wantValid)
			}
			if tt.wantErr == "" {
				return
			}
			if len(docs[0].Errors) == 0 {
				t.Fatalf("no error, want %q", tt.wantErr)
			}
			if got := docs[0].Errors[0].Error(); !strings.Contains(got, tt.wantErr) {
				t.Errorf("first error %q, want it to contain %q", got, tt.wantErr)
			}
		})
	}
}

func stdio1000UnknownFields() string {
	var b strings.Builder
	b.WriteString("stdio: {command: srv}\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "f%d: x\n", i)
	}
	return b.String()
}

func TestProblemsPerDocumentAreCapped(t *testing.T) {
	docs := DecodeFile("m.yaml", []byte(withSpec(stdio1000UnknownFields())))
	errs := docs[0].Errors
	if len(errs) != maxDocumentErrors+1 {
		t.Fatalf("got %d errors, want %d and a last line", len(errs), maxDocumentErrors)
	}
	if got, want := errs[len(errs)-1].Error(), "m.yaml:1: document 1 (line 1): 950 more problems not shown"; got != want {
		t.Errorf("last error = %q, want %q", got, want)
	}
}

// TestSecretsStayOut breaks env and header entries in every way that
// involves their values and checks that no message repeats a value.
func TestSecretsStayOut(t *testing.T) {
	const secret = "s3cr3t-Value-42"
	specs := []string{
		"stdio: {command: srv, env: [{name: A, value: [" + secret + "]}]}",
		"stdio: {command: srv, env: [{name: A, value: {k: " + secret + "}}]}",
		"stdio: {command: srv, env: [{name: A, value: \"" + secret + "\\0\"}]}",
		"stdio: {command: srv, env: [{name: A, value: " + secret + ", valueFrom: {env: B}}]}",
		"stdio: {command: srv, env: [{name: A, value: " + secret + "}, {name: A, value: " + secret + "}]}",
		"stdio: {command: srv, env: [{value: " + secret + "}]}",
		"stdio: {command: srv, env: [{name: A, value: !!binary " + secret + "}]}",
		"http: {url: http://h/mcp, headers: [{name: X, value: \"" + secret + "\\r\\nY: z\"}]}",
		"http: {url: http://h/mcp, headers: [{name: \"X Y\", value: " + secret + "}]}",
		"http: {url: \"http://u:" + secret + "@[::1/mcp\"}",
		"http: {url: \"ftp://u:" + secret + "@h/mcp\"}",
		"http: {url: \"http://[::1/mcp?token=" + secret + "\"}",
	}
	for _, s := range specs {
		docs := DecodeFile("m.yaml", []byte(withSpec(s)))
		if len(docs) != 1 || len(docs[0].Errors) == 0 {
			t.Errorf("%s: want an error, got %+v", s, docs)
			continue
		}
		for _, e := range docs[0].Errors {
			if strings.Contains(e.Error(), "s3cr3t") {
				t.Errorf("%s: error shows the secret: %s", s, e)
			}
		}
	}
}
