package catalog

import (
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func sample() *Catalog {
	return &Catalog{
		Tools:             []*mcp.Tool{{Name: "echo", Description: "echoes"}, {Name: "add"}},
		Prompts:           []*mcp.Prompt{{Name: "greet"}},
		Resources:         []*mcp.Resource{{URI: "file:///a", Name: "a"}},
		ResourceTemplates: []*mcp.ResourceTemplate{{URITemplate: "file:///{path}", Name: "files"}},
	}
}

func TestHashIgnoresOrderButNotContent(t *testing.T) {
	a, b := sample(), sample()
	b.Tools[0], b.Tools[1] = b.Tools[1], b.Tools[0]
	if a.Hash() != b.Hash() {
		t.Error("the same definitions in another order hash differently")
	}
	b.Tools[0].Description = "adds"
	if a.Hash() == b.Hash() {
		t.Error("a changed description did not change the hash")
	}
	if !strings.HasPrefix(a.Hash(), "sha256:") {
		t.Errorf("hash %q", a.Hash())
	}
}

func TestNamesAndDiff(t *testing.T) {
	prev := sample().Names()
	want := []string{"add", "echo", "prompt:greet", "resource:file:///a", "resourceTemplate:file:///{path}"}
	if !reflect.DeepEqual(prev, want) {
		t.Fatalf("names = %v", prev)
	}
	next := sample()
	next.Tools = next.Tools[:1] // "add" dropped
	next.Prompts = append(next.Prompts, &mcp.Prompt{Name: "bye"})
	added, removed := Diff(prev, next.Names())
	if !reflect.DeepEqual(added, []string{"prompt:bye"}) || !reflect.DeepEqual(removed, []string{"add"}) {
		t.Errorf("added %v removed %v", added, removed)
	}
}

func TestMarshalRoundTripAndTamper(t *testing.T) {
	c := sample()
	data, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(data)
	if err != nil || back.Hash() != c.Hash() {
		t.Fatalf("round trip: %v, hash %s vs %s", err, back.Hash(), c.Hash())
	}
	for name, bad := range map[string]string{
		"edited":  strings.Replace(string(data), "echoes", "lies", 1),
		"foreign": `{"tools":[{"name":"x"}]}`,
		"junk":    "{",
		"cut":     string(data[:len(data)/2]),
	} {
		if _, err := Unmarshal([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
