package catalog

import (
	"encoding/json"
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

// A saved catalog writes '<', '>' and '&' as themselves, as the bound on
// one list counts them (json.Marshal would make each six bytes); a file
// with them escaped, as an earlier tether wrote it, still loads.
func TestMarshalWritesHTMLCharactersAsThemselves(t *testing.T) {
	c := sample()
	c.Tools[0].Description = strings.Repeat("<a href='x'>&</a>", 100)
	data, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), c.Tools[0].Description) || strings.Contains(string(data), `\u003c`) {
		t.Errorf("the description is not written as itself: %.200s", data)
	}
	escaped, err := json.Marshal(saved{Version: savedVersion, Hash: c.Hash(), Catalog: *c})
	if err != nil {
		t.Fatal(err)
	}
	if len(escaped)-len(strings.TrimSuffix(string(data), "\n")) != 5*5*100 {
		t.Errorf("saved %d bytes, escaped %d: want the 500 escapes' 2,500 bytes fewer", len(data), len(escaped))
	}
	for name, b := range map[string][]byte{"as written": data, "escaped": escaped} {
		back, err := Unmarshal(b)
		if err != nil || back.Hash() != c.Hash() || back.Tools[0].Description != c.Tools[0].Description {
			t.Errorf("%s: %v, hash %v", name, err, back != nil && back.Hash() == c.Hash())
		}
	}
}
