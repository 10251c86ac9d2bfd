//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/diff"
	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// catalogNames lists the gateway's prompts, resource URIs and templates.
func (gc *gatewayClient) catalogNames(t *testing.T) (prompts, resources, templates []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for p, err := range gc.session.Prompts(ctx, nil) {
		if err != nil {
			t.Fatalf("prompts/list: %v", err)
		}
		prompts = append(prompts, p.Name)
	}
	for r, err := range gc.session.Resources(ctx, nil) {
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		resources = append(resources, r.URI)
	}
	for r, err := range gc.session.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatalf("resources/templates/list: %v", err)
		}
		templates = append(templates, r.URITemplate)
	}
	slices.Sort(prompts)
	slices.Sort(resources)
	slices.Sort(templates)
	return prompts, resources, templates
}

// applyNames is list with what a diff says each connection loses taken
// out and what it gains put in, sorted.
func applyNames(list []string, r *diff.Result, names func(diff.Connection) *diff.Names) []string {
	out := slices.Clone(list)
	for _, c := range r.Connections {
		if n := names(c); n != nil {
			out = slices.DeleteFunc(out, func(s string) bool { return slices.Contains(n.Removed, s) })
			out = append(out, n.Added...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestDiffPredictsPromptsAndResources: two connections to the go-sdk's
// everything-server (prompts, resources, a template; OnDemand, so tether
// keeps their catalogs) contest its resources; the change removes the one
// that holds them and renames the other's prefix. diff predicts prompts
// lost and gained, resources and the template gained by the one that lost
// them, and the collisions resolved; applied, the gateway's prompts/list,
// resources/list and resources/templates/list are exactly that.
func TestDiffPredictsPromptsAndResources(t *testing.T) {
	bin := builtBinaries(t)
	server := filepath.Join(bin, "everything-server")
	if _, err := os.Stat(server); err != nil {
		t.Fatalf("the everything-server peer is not built (make peers): %v", err)
	}
	dir := t.TempDir()
	lazy := "  lifecycle: {mode: OnDemand, idleTimeout: 1s}\n"
	writeFile(t, filepath.Join(dir, "ev1.yaml"), stdioManifest("ev1", server, nil, lazy))
	writeFile(t, filepath.Join(dir, "ev2.yaml"), stdioManifest("ev2", server, nil, lazy))
	port := testport.Free(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	startTether(t, dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	waitTCP(t, port, 20*time.Second)
	for _, name := range []string{"ev1", "ev2"} {
		waitStatus(t, filepath.Join(dir, name+".yaml"), name, 60*time.Second, "Idle", phaseIs(spec.PhaseIdle))
	}
	// ev2 loses the resources and the template to ev1 (tied claims: the
	// name); idle, neither shows collisions in its status.
	gc := connectGateway(t, &mcp.StreamableClientTransport{Endpoint: url})
	prompts, resources, templates := gc.catalogNames(t)
	if !slices.Contains(prompts, "ev1_test_simple_prompt") || !slices.Contains(resources, "test://static-text") || !slices.Contains(templates, "test://template/{id}/data") {
		t.Fatalf("the gateway lists prompts %v, resources %v, templates %v", prompts, resources, templates)
	}

	next := t.TempDir()
	writeFile(t, filepath.Join(next, "ev2.yaml"), stdioManifest("ev2", server, nil, lazy+"  toolPrefix: two\n"))
	out, stderr, code := runDiffCmd(t, nil, "--dir", dir, "-o", "json", next)
	if code != 1 {
		t.Fatalf("exit status %d, want 1; stderr: %s", code, stderr)
	}
	var r diff.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	text, _, _ := runDiffCmd(t, nil, "--dir", dir, next)
	t.Logf("tether diff:\n%s", text)
	byName := map[string]diff.Connection{}
	for _, c := range r.Connections {
		byName[c.Name] = c
	}
	ev1, ev2 := byName["ev1"], byName["ev2"]
	if ev1.Change != diff.Removed || ev2.Change != diff.InPlace || ev1.Catalog != "known" || ev2.Catalog != "known" {
		t.Fatalf("ev1 %+v, ev2 %+v", ev1, ev2)
	}
	if ev1.Prompts == nil || !slices.Contains(ev1.Prompts.Removed, "ev1_test_simple_prompt") ||
		ev2.Prompts == nil || !slices.Contains(ev2.Prompts.Removed, "ev2_test_simple_prompt") || !slices.Contains(ev2.Prompts.Added, "two_test_simple_prompt") {
		t.Errorf("prompts: ev1 %+v, ev2 %+v", ev1.Prompts, ev2.Prompts)
	}
	if ev1.Resources == nil || !slices.Contains(ev1.Resources.Removed, "test://static-text") ||
		ev2.Resources == nil || !slices.Contains(ev2.Resources.Added, "test://static-text") {
		t.Errorf("resources: ev1 %+v, ev2 %+v", ev1.Resources, ev2.Resources)
	}
	if ev2.ResourceTemplates == nil || !slices.Equal(ev2.ResourceTemplates.Added, []string{"test://template/{id}/data"}) {
		t.Errorf("templates: ev2 %+v", ev2.ResourceTemplates)
	}
	if !slices.Contains(r.CollisionsResolved, diff.Collision{Name: "resource:test://static-text", Owner: "ev1", Loser: "ev2"}) ||
		!slices.Contains(r.CollisionsResolved, diff.Collision{Name: "resourceTemplate:test://template/{id}/data", Owner: "ev1", Loser: "ev2"}) {
		t.Errorf("collisions resolved %v", r.CollisionsResolved)
	}
	wantPrompts := applyNames(prompts, &r, func(c diff.Connection) *diff.Names { return c.Prompts })
	wantResources := applyNames(resources, &r, func(c diff.Connection) *diff.Names { return c.Resources })
	wantTemplates := applyNames(templates, &r, func(c diff.Connection) *diff.Names { return c.ResourceTemplates })

	// Apply it, and compare with what the gateway lists then.
	must(t, os.Remove(filepath.Join(dir, "ev1.yaml")))
	data, err := os.ReadFile(filepath.Join(next, "ev2.yaml"))
	must(t, err)
	writeFile(t, filepath.Join(dir, "ev2.yaml"), string(data))
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, res, tm := gc.catalogNames(t)
		if slices.Equal(p, wantPrompts) && slices.Equal(res, wantResources) && slices.Equal(tm, wantTemplates) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway lists\n  prompts %v\n  resources %v\n  templates %v\ndiff predicted\n  prompts %v\n  resources %v\n  templates %v",
				p, res, tm, wantPrompts, wantResources, wantTemplates)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
