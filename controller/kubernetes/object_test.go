package kubernetes

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/spec"
)

// object builds an McpConnection as the informer delivers it: server fields
// in metadata, a status, numbers as int64.
func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetNamespace("team")
	u.SetUID("0b6f2c1e-1d7a-4d55-9b7e-0c0f5f1d2a11")
	u.SetResourceVersion("42")
	u.SetGeneration(3)
	u.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"})
	u.Object["status"] = map[string]any{"phase": "Connected", "attempt": int64(0)}
	return u
}

const valid = `apiVersion: tether.dev/v1alpha1
kind: McpConnection
metadata:
  name: github
  labels: {team: infra}
spec:
  http:
    url: https://example.com/mcp
  healthCheck: {interval: 10s, failureThreshold: 2}
`

// TestDecodeObject: an object's spec goes through the manifest's decoding
// and validation; the server's metadata and the status are not the spec's
// business; problems name the object and the field.
func TestDecodeObject(t *testing.T) {
	conn, problem := decodeObject(object(t, valid))
	if problem != "" || conn == nil {
		t.Fatalf("valid object: %v, %q", conn, problem)
	}
	if conn.Metadata.Name != "github" || conn.Metadata.Labels["team"] != "infra" || conn.ToolPrefix() != "github" ||
		conn.Spec.HealthInterval() != 10*time.Second || conn.Spec.FailureThreshold() != 2 || conn.Spec.HTTP.Transport != spec.TransportStreamable {
		t.Errorf("decoded %+v", conn)
	}
	// The same spec in a file decodes to the same hash.
	docs := spec.DecodeFile("github.yaml", []byte(valid))
	if docs[0].Conn.Spec.Hash() != conn.Spec.Hash() {
		t.Error("an object and a file with the same spec hash differently")
	}

	for _, tc := range []struct{ name, doc, want string }{
		{"a name the API server accepts, a connection cannot have",
			strings.Replace(valid, "name: github", "name: git.hub", 1),
			`McpConnection team/git.hub: metadata.name: invalid name: must be a DNS-1123 label`},
		{"two transports",
			strings.Replace(valid, "  http:\n", "  stdio: {command: srv}\n  http:\n", 1),
			"McpConnection team/github: spec: stdio and http are mutually exclusive: set exactly one"},
		{"several problems, each named",
			strings.Replace(valid, "https://example.com/mcp", "ftp://example.com/mcp", 1) + "  backoff: {initial: 5s, max: 1s}\n",
			`McpConnection team/github: spec.http.url: unsupported scheme "ftp" (want http or https); McpConnection team/github: spec.backoff.max: 1s is less than backoff.initial (5s)`},
		{"an unknown field (a schema-less CRD would let it through)",
			valid + "  retries: 3\n",
			"McpConnection team/github: spec.retries: unknown field"},
		{"no spec",
			"apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: {name: github}\n",
			"McpConnection team/github: spec: exactly one of stdio, http or container is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, problem := decodeObject(object(t, tc.doc))
			if conn != nil || !strings.HasPrefix(problem, tc.want) {
				t.Errorf("got %v, %q\nwant the problem %q", conn, problem, tc.want)
			}
		})
	}
}

func TestConnectionName(t *testing.T) {
	if got := ConnectionName("team", "team", "github"); got != "github" {
		t.Errorf("one namespace: %q", got)
	}
	if got := ConnectionName("", "team", "github"); got != "team.github" {
		t.Errorf("all namespaces: %q", got)
	}
}

// TestKeepIfSame: a re-delivered object with the same spec and labels keeps
// the spec's pointer (no change for the store); any change of either is a
// new spec.
func TestKeepIfSame(t *testing.T) {
	old, _ := decodeObject(object(t, valid))
	again, _ := decodeObject(object(t, strings.Replace(valid, "interval: 10s", "interval: 10000ms", 1)))
	if desired.Keep(old, again) != old {
		t.Error("the same spec written another way is a new spec")
	}
	relabelled, _ := decodeObject(object(t, strings.Replace(valid, "team: infra", "team: core", 1)))
	if desired.Keep(old, relabelled) != relabelled {
		t.Error("a label change kept the old spec")
	}
	edited, _ := decodeObject(object(t, strings.Replace(valid, "failureThreshold: 2", "failureThreshold: 4", 1)))
	if desired.Keep(old, edited) != edited {
		t.Error("a spec change kept the old spec")
	}
	if desired.Keep(nil, edited) != edited {
		t.Error("no old spec")
	}
}
