package gateway

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type templatedBackend struct {
	fakeBackend
	templates []*mcp.ResourceTemplate
}

func (b *templatedBackend) ResourceTemplates() []*mcp.ResourceTemplate { return b.templates }

// TestExposureCountsWhatIsServed: the exposed counts are what the gateway
// serves: a resource or template the go-sdk server refuses (logged) is not
// exposed, and a name the server lists twice is served once.
func TestExposureCountsWhatIsServed(t *testing.T) {
	b := &templatedBackend{
		fakeBackend: fakeBackend{resources: []*mcp.Resource{
			{URI: "res://a/ok", Name: "ok"},
			{URI: "res://a/bad%zz", Name: "bad escape"},
			{URI: "res://a/twice", Name: "twice"},
			{URI: "res://a/twice", Name: "twice"},
		}},
		templates: []*mcp.ResourceTemplate{
			{URITemplate: "item://a/{id", Name: "unclosed"},
			{URITemplate: "item://a/{id}", Name: "fine"},
		},
	}
	g := New(Options{Logger: testLogger(t)})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	g.Set(Connection{Name: "a", Prefix: "a", Backend: b})
	rc := dialRich(t, url, "", nil)
	served := rc.resourceURIs(t) // resources and templates
	x := g.Exposure("a")
	if x.Resources != 2 || x.ResourceTemplates != 1 || len(served) != 3 {
		t.Errorf("exposed %d resources and %d templates, the gateway serves %v; want 2, 1 and those 3", x.Resources, x.ResourceTemplates, served)
	}
	if x.Collisions != nil {
		t.Errorf("collisions %v, want none", x.Collisions)
	}
}
