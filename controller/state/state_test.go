package state

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/catalog"
	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/spec"
)

func decode(t *testing.T, text string) *spec.McpConnection {
	t.Helper()
	docs := spec.DecodeFile("m.yaml", []byte(text))
	if len(docs) != 1 || docs[0].Conn == nil {
		t.Fatalf("fixture does not decode: %+v", docs)
	}
	return docs[0].Conn
}

// TestSpecsRoundTrip: a saved spec loads back with the same hash (what
// decides a reconnect), its place in the tree, and nothing else.
func TestSpecsRoundTrip(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "state"), 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := decode(t, `apiVersion: tether.dev/v1alpha1
kind: McpConnection
metadata: {name: gh, labels: {team: infra}}
spec:
  stdio:
    command: ./bin/server
    args: ["yes", "null", "0x1F", "1e3", "a: b", "#c", "{d}", "- e", "é\u2028f", "<&>", "", "~"]
    env: [{name: TOKEN, value: plain-value-123}, {name: HOME, valueFrom: {env: HOME}}]
  toolPrefix: ""
  tools: {deny: ["delete_*"]}
  healthCheck: {interval: 10s}
  callTimeout: 1m30s
`)
	e := desired.Entry{Name: "gh", Origin: "m/gh.yaml", Index: 2, Dir: "m", Conn: conn}
	if err := d.SaveSpec(e); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(d.Path(), "specs", "junk.json"), "{not json")
	writeFile(t, filepath.Join(d.Path(), "specs", "other.json"), `{"origin":"x.yaml","index":0,"dir":".","manifest":"`+
		`apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: {name: gh}\nspec: {stdio: {command: x}}\n"}`)
	writeFile(t, filepath.Join(d.Path(), "specs", "bad.json"), `{"origin":"x.yaml","index":0,"dir":".","manifest":"kind: Nope\n"}`)
	got, problems := d.LoadSpecs()
	if len(got) != 1 {
		t.Fatalf("loaded %d specs, want 1: %+v", len(got), got)
	}
	l := got["gh"]
	if l.Origin != e.Origin || l.Index != 2 || l.Dir != "m" || l.Conn.Spec.Hash() != conn.Spec.Hash() ||
		l.Conn.ToolPrefix() != "" || l.Conn.Metadata.Labels["team"] != "infra" {
		t.Errorf("loaded %+v (hash %s), want %+v (hash %s)", l, l.Conn.Spec.Hash(), e, conn.Spec.Hash())
	}
	var text []string
	for _, p := range problems {
		text = append(text, p.Error())
	}
	joined := strings.Join(text, "\n")
	for _, want := range []string{"junk.json: ignored: not a saved spec", `other.json: ignored: it holds the spec of "gh"`, "bad.json: ignored: its manifest does not decode"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
	if err := d.DeleteSpec("gh"); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.LoadSpecs(); len(got) != 0 {
		t.Errorf("after DeleteSpec: %+v", got)
	}
	if err := d.DeleteSpec("gh"); err != nil {
		t.Errorf("forgetting twice: %v", err)
	}
}

// TestOpenRefusesWhatItCannotWrite: a state directory that cannot be made
// is an error naming it.
func TestOpenRefusesWhatItCannotWrite(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	writeFile(t, file, "")
	if _, err := Open(filepath.Join(file, "state"), 0); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("Open under a file: %v", err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSpecSavedAsYAMLLoads: a spec an earlier tether saved as block YAML
// (SaveSpec saves JSON) loads as it did.
func TestSpecSavedAsYAMLLoads(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "state"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(d.Path(), "specs"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(d.Path(), "specs", "legacy.json"), `{"origin":"m/legacy.yaml","index":1,"dir":"m","manifest":"`+
		`apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: legacy\nspec:\n  http:\n    url: http://127.0.0.1:1/mcp\n  callTimeout: 1m30s\n"}`)
	got, problems := d.LoadSpecs()
	l, ok := got["legacy"]
	if !ok || len(problems) != 0 {
		t.Fatalf("loaded %+v, problems %v; want legacy", got, problems)
	}
	want := decode(t, "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: {name: legacy}\nspec: {http: {url: \"http://127.0.0.1:1/mcp\"}, callTimeout: 1m30s}\n")
	if l.Origin != "m/legacy.yaml" || l.Index != 1 || l.Dir != "m" || l.Conn.Spec.Hash() != want.Spec.Hash() {
		t.Errorf("loaded %+v (hash %s), want hash %s", l, l.Conn.Spec.Hash(), want.Spec.Hash())
	}
}

// TestLargeSpecsLoadBack: a valid manifest near spec.MaxFileSize whose
// values JSON must escape is saved in a form that loads back; one whose
// saved form would be over the limit either way is an error at the save,
// not a spec ignored at the next start.
func TestLargeSpecsLoadBack(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "state"), 0)
	if err != nil {
		t.Fatal(err)
	}
	manifest := func(name, value string) *spec.McpConnection {
		return decode(t, "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: {name: "+name+"}\n"+
			"spec:\n  stdio:\n    command: ./s\n    env:\n    - name: V\n      value: '"+value+"'\n")
	}
	saved := map[string]*spec.McpConnection{}
	for name, value := range map[string]string{
		"quotes":     strings.Repeat(`{"k":"v"},`, 70_000), // 700 kB; as JSON 1 MB more
		"ampersands": strings.Repeat("a&b<c>", 50_000),     // 300 kB; 1.2 MB more if HTML-escaped
		"backslash":  strings.Repeat(`C:\x\`, 150_000),     // 750 kB; as JSON 300 kB more
		"separators": strings.Repeat("\u2028", 300_000),    // 900 kB; as JSON 900 kB more
	} {
		saved[name] = manifest(name, value)
		if err := d.SaveSpec(desired.Entry{Name: name, Origin: name + ".yaml", Dir: ".", Conn: saved[name]}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	got, problems := d.LoadSpecs()
	if len(problems) != 0 {
		t.Errorf("problems: %v", problems)
	}
	for name, conn := range saved {
		if l, ok := got[name]; !ok || l.Conn.Spec.Hash() != conn.Spec.Hash() {
			t.Errorf("%s: not loaded back as saved (loaded: %v)", name, ok)
		}
	}

	// '&', '<' and '>' need no escaping: that one stays JSON.
	data, err := os.ReadFile(filepath.Join(d.Path(), "specs", "ampersands.json"))
	if err != nil || !strings.Contains(string(data), `"manifest":"{`) {
		t.Errorf("ampersands was not saved as JSON (%v)", err)
	}

	// Tabs: each one byte in the manifest, two as JSON and as YAML.
	err = d.SaveSpec(desired.Entry{Name: "tabs", Origin: "tabs.yaml", Dir: ".", Conn: manifest("tabs", strings.Repeat("\t", 600_000))})
	if err == nil || !strings.Contains(err.Error(), "tabs") || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("saving a spec too big to load back: %v, want an error naming it and the limit", err)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), "specs", "tabs.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a spec too big to load back was saved: %v", err)
	}
}

// TestSpecAtTheSizeLimit: a document of exactly spec.MaxFileSize bytes,
// as JSON or (its JSON over the limit) as YAML, is saved in that form and
// loads back.
func TestSpecAtTheSizeLimit(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "state"), 0)
	if err != nil {
		t.Fatal(err)
	}
	// sized returns the spec whose value is n times unit, and the size of
	// the document SaveSpec keeps for it.
	sized := func(name, unit string, n int, render func(*spec.McpConnection) ([]byte, error)) (*spec.McpConnection, int) {
		c := decode(t, "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: {name: "+name+"}\n"+
			"spec:\n  stdio:\n    command: ./s\n    env:\n    - name: V\n      value: 'x"+strings.Repeat(unit, n)+"'\n")
		doc, err := render(c)
		if err != nil {
			t.Fatal(err)
		}
		return c, len(doc)
	}
	asJSON := func(c *spec.McpConnection) ([]byte, error) {
		b, err := json.Marshal(c)
		return append(b, '\n'), err
	}
	for _, tc := range []struct {
		name, unit string
		render     func(*spec.McpConnection) ([]byte, error)
		json       bool
	}{
		{"json", "a", asJSON, true},
		{"yaml", `"`, func(c *spec.McpConnection) ([]byte, error) { return spec.RenderYAML(c) }, false}, // '"': two bytes as JSON, one as YAML
	} {
		_, size := sized(tc.name, tc.unit, 1000, tc.render)
		conn, size := sized(tc.name, tc.unit, 1000+spec.MaxFileSize-size, tc.render)
		if size != spec.MaxFileSize {
			t.Fatalf("%s: fixture of %d bytes, want %d", tc.name, size, spec.MaxFileSize)
		}
		if err := d.SaveSpec(desired.Entry{Name: tc.name, Origin: tc.name + ".yaml", Dir: ".", Conn: conn}); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		data, err := os.ReadFile(filepath.Join(d.Path(), "specs", tc.name+".json"))
		if isJSON := err == nil && strings.Contains(string(data), `"manifest":"{`); isJSON != tc.json {
			t.Errorf("%s: saved as JSON: %v, want %v (%v)", tc.name, isJSON, tc.json, err)
		}
	}
	got, problems := d.LoadSpecs()
	if len(got) != 2 || len(problems) != 0 {
		t.Errorf("loaded %d specs (problems %v), want both", len(got), problems)
	}
}

// TestCatalogTooLargeToLoadIsNotSaved: a catalog that would be saved
// larger than a state file may be read is not written (the next start
// would ignore it), and the one saved before, no longer what the server
// publishes, is removed; the error names the connection and both sizes. A
// catalog of exactly the limit is saved and loads back.
func TestCatalogTooLargeToLoadIsNotSaved(t *testing.T) {
	const limit = 4096
	d, err := Open(filepath.Join(t.TempDir(), "state"), limit)
	if err != nil {
		t.Fatal(err)
	}
	sized := func(n int) *catalog.Catalog {
		return &catalog.Catalog{Tools: []*mcp.Tool{{Name: "t", Description: strings.Repeat("d", n)}}}
	}
	size := func(c *catalog.Catalog) int {
		b, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	atLimit := sized(limit - size(sized(1)) + 1)
	if n := size(atLimit); n != limit {
		t.Fatalf("fixture of %d bytes, want %d", n, limit)
	}
	if err := d.SaveCatalog("c", atLimit); err != nil {
		t.Fatalf("a catalog of the limit: %v", err)
	}
	if back, err := d.LoadCatalog("c"); err != nil || back == nil || back.Hash() != atLimit.Hash() {
		t.Fatalf("a catalog of the limit loads back: %v, %v", back, err)
	}

	over := sized(limit - size(sized(1)) + 2)
	err = d.SaveCatalog("c", over)
	var tooLarge *catalog.TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Size != limit+1 || tooLarge.Limit != limit {
		t.Fatalf("SaveCatalog over the limit: %v, want a TooLargeError of %d bytes over %d", err, limit+1, limit)
	}
	for _, want := range []string{"catalog of c", "4097 bytes", "limit of 4096 bytes", "--max-state-file-size"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(d.Path(), "catalogs", "c.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the catalog saved before is still there: %v", err)
	}
	if back, err := d.LoadCatalog("c"); back != nil || err != nil {
		t.Errorf("LoadCatalog after: %v, %v; want none", back, err)
	}
	// The one saved before cannot be removed: a failure, tried again (no
	// TooLargeError), or the next start would serve that catalog.
	stuck := filepath.Join(d.Path(), "catalogs", "stuck.json")
	if err := os.MkdirAll(filepath.Join(stuck, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	err = d.SaveCatalog("stuck", over)
	if err == nil || errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "removing the one saved before") || !strings.Contains(err.Error(), "4097 bytes") {
		t.Errorf("SaveCatalog over the limit when the one saved before cannot be removed: %v, want a failure that is no TooLargeError", err)
	}
	// And with nothing saved before: nothing to remove, nothing failed.
	if err := d.SaveCatalog("fresh", over); !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "none kept") || strings.Contains(err.Error(), "removing") {
		t.Errorf("SaveCatalog of a new connection over the limit: %v", err)
	}
}
