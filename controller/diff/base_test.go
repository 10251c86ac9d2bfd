package diff

import (
	"slices"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/spec"
)

// TestAddListing: a connection's catalog is learnt from what the gateway
// lists under its prefix and filter and from the names it lost (its
// status), and is complete only when that accounts for what its status
// counts.
func TestAddListing(t *testing.T) {
	stdio := "  stdio: {command: srv}\n"
	b := Base{
		Entries: entries(t, "/srv/m", map[string]string{
			"gh.yaml":   doc("gh", stdio+"  tools: {deny: [secret]}\n"),
			"s.yaml":    doc("s", stdio+"  toolPrefix: gh\n"),
			"ghb.yaml":  doc("ghb", stdio+"  toolPrefix: gh_b\n"),
			"bare.yaml": doc("bare", stdio+"  toolPrefix: \"\"\n"),
			"od.yaml":   doc("od", stdio),
		}),
		Catalogs: map[string]*Catalog{"od": {Tools: []string{"x"}, Complete: true}},
		Owners:   map[string]string{"gh_echo": "gh", "prompt:gh_p": "gh"},
		status: map[string]status{
			"gh": {tools: &spec.Counts{Count: 3}, prompts: &spec.Counts{Count: 1}, collisions: []spec.ToolCollision{
				{Tool: "gh_echo", Connection: "s", Kept: true}, {Tool: "prompt:gh_p", Connection: "s", Kept: true}}},
			"s": {tools: &spec.Counts{Count: 1}, prompts: &spec.Counts{Count: 1}, collisions: []spec.ToolCollision{
				{Tool: "gh_echo", Connection: "gh"}, {Tool: "prompt:gh_p", Connection: "gh"}}},
			"ghb":  {tools: &spec.Counts{Count: 1}},
			"bare": {tools: &spec.Counts{Count: 1}, resources: &spec.Counts{Count: 1}},
		},
	}
	b.AddListing(Listing{Tools: []string{"gh_echo", "gh_add", "gh_b_run", "plain", "od_x"}, Prompts: []string{"gh_p"}, Resources: []string{"file:///a"}}, Options{})
	want := map[string]Catalog{
		"gh":   {Tools: []string{"add", "echo"}, Prompts: []string{"p"}},          // secret is denied: not seen, partial
		"s":    {Tools: []string{"echo"}, Prompts: []string{"p"}, Complete: true}, // all it has, lost to gh
		"ghb":  {Tools: []string{"run"}, Complete: true},                          // the longer prefix
		"bare": {Tools: []string{"plain"}},                                        // lists resources: partial
		"od":   {Tools: []string{"x"}, Complete: true},                            // kept in the state directory
	}
	for name, w := range want {
		got := b.Catalogs[name]
		if got == nil || !slices.Equal(got.Tools, w.Tools) || !slices.Equal(got.Prompts, w.Prompts) || got.Complete != w.Complete {
			t.Errorf("%s: %+v, want %+v", name, got, w)
		}
	}
}

// TestAddListingMaxNameLength: the names a known catalog exposes are found
// with the gateway's --max-name-length, so a long name it serves (allowed
// by a larger limit) stays its own and is not given to another connection.
func TestAddListingMaxNameLength(t *testing.T) {
	stdio := "  stdio: {command: srv}\n"
	long := strings.Repeat("x", 150)
	b := Base{
		Entries: entries(t, "/srv/m", map[string]string{
			"bare.yaml": doc("bare", stdio+"  toolPrefix: \"\"\n"),
			"od.yaml":   doc("od", stdio),
		}),
		Catalogs: map[string]*Catalog{"od": {Tools: []string{long}, Complete: true}},
		status:   map[string]status{"bare": {tools: &spec.Counts{Count: 1}}},
	}
	b.AddListing(Listing{Tools: []string{"od_" + long, "plain"}}, Options{MaxNameLength: 200})
	if got := b.Catalogs["bare"]; got == nil || !slices.Equal(got.Tools, []string{"plain"}) || !got.Complete {
		t.Errorf("bare: %+v, want only plain, complete", got)
	}
}
