package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v3"
)

// resolvedSchema is Schema, ready to validate with.
func resolvedSchema(t testing.TB, b []byte) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("the schema does not decode: %v", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("the schema does not resolve: %v", err)
	}
	return rs
}

// jsonDocument is one document of a manifest file as JSON, what an editor
// checks against the schema. ok is false when the document is not JSON
// (a YAML syntax error, a duplicate key, a key that is not a string).
type jsonDocument struct {
	value any
	ok    bool
}

// jsonDocuments reads data the way DecodeFile does (same BOM handling, same
// split, same empty documents skipped), so that its result lines up with
// DecodeFile's documents.
func jsonDocuments(data []byte) []jsonDocument {
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	var out []jsonDocument
	for _, c := range splitDocuments(data, MaxDocuments) {
		var root yaml.Node
		err := yaml.NewDecoder(bytes.NewReader(c.text)).Decode(&root)
		switch {
		case errors.Is(err, io.EOF):
			continue
		case err != nil:
			out = append(out, jsonDocument{})
			continue
		case len(root.Content) == 0 || isImplicitNull(root.Content[0]):
			continue
		}
		var v any
		if err := root.Decode(&v); err != nil {
			out = append(out, jsonDocument{})
			continue
		}
		// A round trip through encoding/json gives the values a JSON
		// decoder would (float64 numbers, map[string]any); it fails on
		// what JSON cannot hold (map[any]any keys, NaN).
		b, err := json.Marshal(v)
		if err != nil {
			out = append(out, jsonDocument{})
			continue
		}
		var j any
		if err := json.Unmarshal(b, &j); err != nil {
			out = append(out, jsonDocument{})
			continue
		}
		out = append(out, jsonDocument{value: j, ok: true})
	}
	return out
}

// manifestCorpus is every manifest-like file the repository's tests and
// examples use, by name: the decode fixtures, the fuzz seeds, the rule cases,
// examples/ and cmd/tether's testdata.
func manifestCorpus(t *testing.T) map[string][]byte {
	t.Helper()
	corpus := map[string][]byte{}
	for _, rc := range ruleCases {
		corpus["rule case "+rc.name] = []byte(rc.in)
	}
	seeds, err := filepath.Glob("testdata/fuzz/FuzzDecodeFile/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range seeds {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		// go test fuzz v1 \n []byte("...")
		_, arg, _ := strings.Cut(string(b), "\n")
		arg = strings.TrimSpace(arg)
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(arg, "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: not a []byte seed: %v", name, err)
		}
		corpus[name] = []byte(s)
	}
	for _, root := range []string{"testdata/decode", "../examples", "../cmd/tether/testdata"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			ext := filepath.Ext(path)
			if ext != ".yaml" && ext != ".yml" && !strings.HasSuffix(path, "validate/manifest.txt") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err == nil {
				corpus[path] = b
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return corpus
}

// TestSchemaAcceptsEveryValidManifest: whatever DecodeFile accepts, the
// schema accepts, so an editor never flags a manifest that tether runs. It
// also counts how many of the invalid documents the schema rejects.
func TestSchemaAcceptsEveryValidManifest(t *testing.T) {
	rs := resolvedSchema(t, Schema())
	valid, invalid, rejected := 0, 0, 0
	for name, data := range manifestCorpus(t) {
		docs := DecodeFile(name, data)
		if len(docs) == 1 && docs[0].Index == -1 {
			continue // not text, too big: not a document an editor checks
		}
		js := jsonDocuments(data)
		if len(js) != len(docs) {
			t.Errorf("%s: %d documents as JSON, %d for DecodeFile", name, len(js), len(docs))
			continue
		}
		for i, d := range docs {
			if d.Conn == nil {
				invalid++
				if !js[i].ok || rs.Validate(js[i].value) != nil {
					rejected++
				}
				continue
			}
			valid++
			if !js[i].ok {
				t.Errorf("%s: document %d is valid but not JSON", name, i+1)
			} else if err := rs.Validate(js[i].value); err != nil {
				t.Errorf("%s: document %d is valid, the schema rejects it: %v", name, i+1, err)
			}
		}
	}
	t.Logf("%d valid documents accepted; %d of %d invalid ones rejected", valid, rejected, invalid)
	if valid < 50 || invalid < 50 {
		t.Errorf("the corpus has %d valid and %d invalid documents: fewer than expected, is it read?", valid, invalid)
	}
}

// schemaCannotSay are the rule cases that break a rule JSON Schema cannot
// state (or that this schema leaves to DecodeFile), with the reason. Every
// other invalid rule case must be rejected by the schema.
var schemaCannotSay = map[string]string{
	"url with another scheme":                           "URL syntax: left to validation",
	"url without scheme":                                "URL syntax: left to validation",
	"url without host":                                  "URL syntax: left to validation",
	"url that does not parse, not echoed":               "URL syntax: left to validation",
	"url port over 65535":                               "URL syntax: left to validation",
	"url port 0":                                        "URL syntax: left to validation",
	"url port too long to be a number, not echoed":      "URL syntax: left to validation",
	"url port without host":                             "URL syntax: left to validation",
	"command with NUL":                                  "NUL characters: left to validation",
	"duration zero":                                     "a positive duration: the pattern allows 0s",
	"lifecycle idleTimeout zero":                        "a positive duration: the pattern allows 0s",
	"lifecycle idleTimeout without OnDemand":            "depends on another field's value",
	"failureThreshold too big":                          "JSON has no integer range: 1e20 is an integer to it",
	"backoff max below initial":                         "compares two fields",
	"backoff initial above the default max":             "compares a field with a default",
	"valueFrom env name with =":                         "env names: left to validation (EnvVar serves headers too)",
	"env name with =":                                   "env names: left to validation (EnvVar serves headers too)",
	"env name twice":                                    "unique names in a list of objects",
	"header name not a token":                           "header names: left to validation (EnvVar serves env too)",
	"header names are case-insensitive":                 "unique names in a list of objects",
	"header value with a line break, not echoed":        "header values: left to validation",
	"glob that does not compile":                        "glob syntax",
	"glob bad after a literal prefix":                   "glob syntax",
	"glob empty":                                        "glob syntax",
	"merge key":                                         "YAML merge keys: a YAML reader expands them",
	"unsupported tag":                                   "YAML tags: a YAML reader resolves them",
	"custom tag":                                        "YAML tags: a YAML reader ignores them",
	"oauth beside an Authorization header":              "header names: left to validation",
	"oauth client secret with a line break, not echoed": "secret values: left to validation",
	"oauth client credentials with a metadata document": "client ID syntax: left to validation",
	"oauth metadata document at the root":               "client ID syntax: left to validation",
	"oauth metadata document port out of range":         "client ID syntax: left to validation",
	"oauth metadata document over http":                 "client ID syntax: left to validation",
	"oauth secret without client ID":                    "compares two fields",
	"oauth secret of a metadata document":               "compares two fields",
	"oauth scopes invalid":                              "scope syntax and unique items: left to validation",
	"container command empty":                           "an empty list: left to validation",
	"container command's program empty":                 "list items: left to validation",
	"container network host":                            "a name refused among names: left to validation",
	"container port without a network":                  "compares two fields",
	"container port out of range":                       "no maximum marker: left to validation",
	"container path without port":                       "compares two fields",
	"container memory too small":                        "a quantity's value: left to validation",
	"container memory too large":                        "a quantity's value: left to validation",
	"container secret file names":                       "names of a list shared with env: left to validation",
	"container secret file name too long":               "names of a list shared with env: left to validation",
	"container env value never quoted":                  "env values: left to validation",
}

// TestSchemaRuleCases partitions the invalid rule cases: the schema rejects
// each one, unless schemaCannotSay says why it cannot; and a case listed
// there must be one the schema accepts, so the list stays true.
func TestSchemaRuleCases(t *testing.T) {
	rs := resolvedSchema(t, Schema())
	for _, rc := range ruleCases {
		t.Run(rc.name, func(t *testing.T) {
			js := jsonDocuments([]byte(rc.in))
			if len(js) != 1 {
				t.Fatalf("%d documents", len(js))
			}
			var err error
			if js[0].ok {
				err = rs.Validate(js[0].value)
			}
			reason, cannot := schemaCannotSay[rc.name]
			switch {
			case len(rc.want) == 0:
				if err != nil {
					t.Errorf("valid, but the schema rejects it: %v", err)
				}
			case !js[0].ok:
				// Not JSON: an editor's YAML parser reports it before the schema.
				if cannot {
					t.Errorf("listed in schemaCannotSay (%s), but it is not even JSON: remove it", reason)
				}
			case cannot && err != nil:
				t.Errorf("listed in schemaCannotSay (%s), but the schema rejects it: %v", reason, err)
			case !cannot && err == nil:
				t.Errorf("invalid (%s), and the schema accepts it", rc.want[0])
			}
		})
	}
}

// TestSchemaRejects: each kind of mistake JSON Schema can describe, and the
// keyword that catches it.
func TestSchemaRejects(t *testing.T) {
	rs := resolvedSchema(t, Schema())
	tests := []struct {
		name, in, keyword string
	}{
		{"unknown top-level field", strings.Replace(withSpec(minimalStdio), "kind:", "status: {}\nkind:", 1), "additional properties"},
		{"unknown spec field", withSpec(minimalStdio + "retries: 3"), "additional properties"},
		{"unknown field in valueFrom", withSpec("stdio:\n  command: a\n  env: [{name: A, valueFrom: {file: /f, secret: x}}]"), "additional properties"},
		{"two transports", withSpec("stdio: {command: a}\nhttp: {url: http://h/mcp}"), "oneOf"},
		{"no transport", withSpec("suspend: true"), "oneOf"},
		{"value and valueFrom", withSpec("stdio:\n  command: a\n  env: [{name: A, value: x, valueFrom: {env: B}}]"), "oneOf"},
		{"file and env", withSpec("http:\n  url: http://h/mcp\n  headers: [{name: A, valueFrom: {file: /f, env: B}}]"), "oneOf"},
		{"neither file nor env", withSpec("http:\n  url: http://h/mcp\n  headers: [{name: A, valueFrom: {}}]"), "oneOf"},
		{"bad duration", withSpec(minimalStdio + "callTimeout: 3x"), "pattern"},
		{"duration without unit", withSpec(minimalStdio + "backoff: {initial: \"30\"}"), "pattern"},
		{"negative duration", withSpec(minimalStdio + "backoff: {max: -1s}"), "pattern"},
		{"duration as a number", withSpec(minimalStdio + "healthCheck: {timeout: 30}"), "type"},
		{"bad name", strings.Replace(withSpec(minimalStdio), "name: demo", "name: My_Server", 1), "pattern"},
		{"name too long", strings.Replace(withSpec(minimalStdio), "name: demo", "name: "+strings.Repeat("a", 64), 1), "maxLength"},
		{"bad transport", withSpec("http: {url: http://h/mcp, transport: websocket}"), "enum"},
		{"bad apiVersion", strings.Replace(withSpec(minimalStdio), "v1alpha1", "v1", 1), "enum"},
		{"bad kind", strings.Replace(withSpec(minimalStdio), "kind: McpConnection", "kind: Pod", 1), "enum"},
		{"missing apiVersion", strings.Replace(withSpec(minimalStdio), "apiVersion: tether.dev/v1alpha1\n", "", 1), "required"},
		{"missing spec", strings.Replace(withSpec(minimalStdio), "spec:\n  stdio: {command: srv}\n", "", 1), "required"},
		{"missing name", strings.Replace(withSpec(minimalStdio), "name: demo", "labels: {}", 1), "required"},
		{"missing command", withSpec("stdio: {args: [x]}"), "required"},
		{"empty command", withSpec(`stdio: {command: ""}`), "minLength"},
		{"missing url", withSpec("http: {transport: sse}"), "required"},
		{"missing env name", withSpec("stdio:\n  command: a\n  env: [{value: x}]"), "required"},
		{"failureThreshold zero", withSpec(minimalStdio + "healthCheck: {failureThreshold: 0}"), "minimum"},
		{"failureThreshold a string", withSpec(minimalStdio + "healthCheck: {failureThreshold: \"3\"}"), "type"},
		{"toolPrefix with a space", withSpec(minimalStdio + `toolPrefix: "a b"`), "pattern"},
		{"args not a list", withSpec("stdio: {command: a, args: -v}"), "type"},
		{"label value a number", strings.Replace(withSpec(minimalStdio), "name: demo", "name: demo\n  labels: {team: 1}", 1), "type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if docs := DecodeFile("m.yaml", []byte(tt.in)); len(docs) != 1 || docs[0].Conn != nil {
				t.Fatalf("DecodeFile accepts it: the case is not invalid")
			}
			js := jsonDocuments([]byte(tt.in))
			if len(js) != 1 || !js[0].ok {
				t.Fatalf("not one JSON document")
			}
			err := rs.Validate(js[0].value)
			if err == nil {
				t.Fatalf("the schema accepts it")
			}
			if !strings.Contains(err.Error(), tt.keyword) {
				t.Errorf("rejected by something else than %s: %v", tt.keyword, err)
			}
		})
	}
}

// TestSchemaMatchesTheCode ties the schema's enums and patterns to the
// constants and expressions the validation uses.
func TestSchemaMatchesTheCode(t *testing.T) {
	var s map[string]any
	if err := json.Unmarshal(Schema(), &s); err != nil {
		t.Fatal(err)
	}
	at := func(path ...string) map[string]any {
		m := s
		for _, p := range path {
			m, _ = m[p].(map[string]any)
		}
		if m == nil {
			t.Fatalf("no %v in the schema", path)
		}
		return m
	}
	check := func(what string, got, want any) {
		t.Helper()
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if !bytes.Equal(g, w) {
			t.Errorf("%s: schema has %s, the code %s", what, g, w)
		}
	}
	props := func(path ...string) map[string]any { return at(append(path, "properties")...) }
	check("apiVersion enum", at("properties", "apiVersion")["enum"], []string{APIVersion})
	check("kind enum", at("properties", "kind")["enum"], []string{Kind})
	check("name pattern", props("properties", "metadata")["name"].(map[string]any)["pattern"], dns1123Label.String())
	check("name maxLength", props("properties", "metadata")["name"].(map[string]any)["maxLength"], maxNameLen)
	spec := props("properties", "spec")
	check("toolPrefix pattern", spec["toolPrefix"].(map[string]any)["pattern"], toolPrefixChars.String())
	check("toolPrefix maxLength", spec["toolPrefix"].(map[string]any)["maxLength"], maxToolPrefixLen)
	http := spec["http"].(map[string]any)["properties"].(map[string]any)
	check("transport enum", http["transport"].(map[string]any)["enum"], []any{TransportStreamable, TransportSSE, nil})
	ref := at("properties", "spec", "properties", "stdio", "properties", "env", "items", "properties", "valueFrom", "properties", "secretKeyRef", "properties")
	check("Secret name pattern", ref["name"].(map[string]any)["pattern"], dns1123Subdomain.String())
	check("Secret name maxLength", ref["name"].(map[string]any)["maxLength"], maxSubdomainLen)
	check("Secret key pattern", ref["key"].(map[string]any)["pattern"], secretKey.String())
	check("Secret key maxLength", ref["key"].(map[string]any)["maxLength"], maxSubdomainLen)

	var status map[string]any
	if err := json.Unmarshal(StatusSchema(), &status); err != nil {
		t.Fatal(err)
	}
	phase := status["properties"].(map[string]any)["status"].(map[string]any)["properties"].(map[string]any)["phase"].(map[string]any)
	check("phase enum", phase["enum"], Phases)
}

// TestSchemaDurationPattern holds the duration pattern to time.ParseDuration
// on strings that name positive durations and on ones that do not parse.
func TestSchemaDurationPattern(t *testing.T) {
	rs := resolvedSchema(t, Schema())
	doc := func(d string) any {
		js := jsonDocuments([]byte(withSpec(minimalStdio + "callTimeout: " + strconv.Quote(d))))
		return js[0].value
	}
	for _, d := range []string{"1ns", "1us", "1µs", "1μs", "1ms", "1s", "1m", "1h", "1h2m3.5s", ".5s", "1.s", "+3s", "2562047h", "0.000001ms"} {
		if docs := DecodeFile("m.yaml", []byte(withSpec(minimalStdio+"callTimeout: "+strconv.Quote(d)))); docs[0].Conn == nil {
			t.Errorf("%q: DecodeFile rejects it: %v", d, docs[0].Errors)
		}
		if err := rs.Validate(doc(d)); err != nil {
			t.Errorf("%q: the schema rejects it: %v", d, err)
		}
	}
	for _, d := range []string{"", "0", "30", "3x", "s", ".s", "1 s", "1S", "-1s", "1s ", "1d", "1e3s", "P1D"} {
		if docs := DecodeFile("m.yaml", []byte(withSpec(minimalStdio+"callTimeout: "+strconv.Quote(d)))); docs[0].Conn != nil {
			t.Errorf("%q: DecodeFile accepts it", d)
		}
		if err := rs.Validate(doc(d)); err == nil {
			t.Errorf("%q: the schema accepts it", d)
		}
	}
}
