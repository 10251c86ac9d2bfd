package statusfile

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/tether-mcp/tether/spec"
)

// nastyStrings are values a server or a manifest error can put in status.
var nastyStrings = []string{
	"", "plain words", "True", "false", "yes", "No", "on", "null", "~", "y", "N",
	"123", "0x1F", "1e3", "1_000", "1:20", ".inf", "-", "- item", "a: b", "a:b", "key:", "a #b", "a#b",
	"#comment", "'single'", `"double"`, "back\\slash", "new\nline", "tab\there", "trailing ", " leading",
	"{flow}", "[seq]", "*alias", "&anchor", "!tag", "%directive", "@at", "`tick`", "|block", ">fold",
	"ünïcödé", "emoji 🚀", "ctrl\x01char", "sha256:abc", "http://127.0.0.1:8080/mcp?x=1&y=2",
	"connected to tether-example-server v1.2.3, 5 tools", "2026-11-22T10:00:00Z", "---", "...",
	"attempt 3 failed: Post \"http://x\": dial tcp: connection refused",
}

func randomString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return nastyStrings[r.IntN(len(nastyStrings))]
	}
	const alphabet = "abcXYZ019 :#-_'\"\\\n\t{}[],&*!|>%@`?.~=+()/;ü"
	n := r.IntN(12)
	var b strings.Builder
	for range n {
		b.WriteByte(alphabet[r.IntN(len(alphabet)-1)])
	}
	return b.String()
}

func randomStatus(r *rand.Rand) spec.StatusDocument {
	ts := func() time.Time { return time.Unix(r.Int64N(2e9), 0).UTC() }
	st := spec.ConnectionStatus{
		Phase:            spec.Phases[r.IntN(len(spec.Phases))],
		ObservedSpecHash: randomString(r),
		Attempt:          r.IntN(100),
		LastError:        randomString(r),
		ManifestError:    randomString(r),
	}
	if r.IntN(2) == 0 {
		st.ObservedGeneration = r.Int64N(1 << 40)
	}
	for _, typ := range []string{spec.ConditionReady, spec.ConditionReconciling, spec.ConditionStalled} {
		st.Conditions = append(st.Conditions, spec.Condition{Type: typ, Status: randomString(r), Reason: randomString(r), Message: randomString(r), LastTransitionTime: ts()})
	}
	if r.IntN(2) == 0 {
		st.Server = &spec.ServerInfo{Name: randomString(r), Version: randomString(r), ProtocolVersion: randomString(r)}
		st.Tools = &spec.Counts{Count: r.IntN(1000), Exposed: r.IntN(1000)}
		for _, c := range []**spec.Counts{&st.Prompts, &st.Resources, &st.ResourceTemplates} {
			if r.IntN(2) == 0 {
				*c = &spec.Counts{Count: r.IntN(1000), Exposed: r.IntN(1000)}
			}
		}
		t := ts()
		st.ConnectedSince = &t
	} else {
		t := ts()
		st.NextRetryTime = &t
	}
	if r.IntN(2) == 0 {
		code := r.IntN(256) - 128
		st.Process = &spec.ProcessStatus{PID: r.IntN(1 << 20), Restarts: r.IntN(9), LastExitCode: &code}
		if r.IntN(2) == 0 {
			st.Process.Container, st.Process.Runtime = randomString(r), randomString(r)
			st.Sandbox = randomString(r)
		}
		for range r.IntN(4) {
			st.Process.StderrTail = append(st.Process.StderrTail, randomString(r))
		}
	}
	if r.IntN(2) == 0 {
		st.Catalog = &spec.CatalogStatus{Hash: randomString(r)}
		if r.IntN(2) == 0 {
			t := ts()
			st.Catalog.ChangedTime = &t
		}
		for range r.IntN(3) {
			st.Catalog.Added = append(st.Catalog.Added, randomString(r))
		}
		for range r.IntN(3) {
			st.Catalog.Removed = append(st.Catalog.Removed, randomString(r))
		}
	}
	for range r.IntN(3) {
		st.Collisions = append(st.Collisions, spec.ToolCollision{Tool: randomString(r), Connection: randomString(r), Kept: r.IntN(2) == 0})
	}
	for range r.IntN(3) {
		st.NameWarnings = append(st.NameWarnings, spec.NameWarning{Name: randomString(r), Warning: randomString(r)})
	}
	return spec.StatusDocument{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.ObjectMeta{Name: randomString(r)}, Status: st}
}

// TestRenderStatusRoundTrip: what render writes decodes, strictly, to
// the document it was given, whatever the strings hold.
func TestRenderStatusRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		doc := randomStatus(r)
		out := render(&doc)
		var back spec.StatusDocument
		if err := yaml.UnmarshalStrict(out, &back); err != nil {
			t.Fatalf("case %d: does not decode: %v\n%s", i, err, out)
		}
		// Compare as JSON values: invalid UTF-8 reads back as U+FFFD, as
		// encoding/json (and so the generic renderer) writes it too.
		want, got := jsonValue(t, doc), jsonValue(t, back)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("case %d: round trip changed the document\nwant %s\n got %s\nyaml:\n%s", i, want, got, out)
		}
	}
}

// TestRenderStatusMatchesGeneric: for ordinary values the fast renderer
// writes what the generic one does, so status files look the same. (It may
// quote more: "1.2.0" is quoted, a plain scalar must start with a letter.)
func TestRenderStatusMatchesGeneric(t *testing.T) {
	code := 1
	since := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	doc := spec.StatusDocument{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.ObjectMeta{Name: "github"},
		Status: spec.ConnectionStatus{
			Phase: spec.PhaseConnected, ObservedSpecHash: "sha256:0123abcd",
			Conditions: []spec.Condition{
				{Type: "Ready", Status: "True", Reason: "Connected", Message: "connected to github-mcp-server 1.2.0, 47 tools", LastTransitionTime: since},
				{Type: "Reconciling", Status: "False", Reason: "Succeeded", LastTransitionTime: since},
			},
			Server:            &spec.ServerInfo{Name: "github-mcp-server", Version: "v1.2.0", ProtocolVersion: "2025-06-18"},
			Tools:             &spec.Counts{Count: 47, Exposed: 40},
			Prompts:           &spec.Counts{Count: 3, Exposed: 2},
			Resources:         &spec.Counts{Count: 12, Exposed: 12},
			ResourceTemplates: &spec.Counts{Count: 1, Exposed: 1},
			ConnectedSince:    &since,
			Process:           &spec.ProcessStatus{PID: 4242, Restarts: 3, LastExitCode: &code, StderrTail: []string{"listening on stdio"}},
			Collisions:        []spec.ToolCollision{{Tool: "gh_search", Connection: "another"}, {Tool: "gh_get", Connection: "third", Kept: true}},
			NameWarnings:      []spec.NameWarning{{Name: "tool:bad", Warning: "not exposed (too long)"}},
		}}
	generic, err := spec.RenderYAML(doc)
	if err != nil {
		t.Fatal(err)
	}
	if fast := render(&doc); string(fast) != string(generic) {
		t.Errorf("renderers differ\nfast:\n%s\ngeneric:\n%s", fast, generic)
	}
}

func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func BenchmarkRenderStatus(b *testing.B) {
	doc := randomStatus(rand.New(rand.NewPCG(3, 4)))
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			render(&doc)
		}
	})
	b.Run("generic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = spec.RenderYAML(doc)
		}
	})
}
