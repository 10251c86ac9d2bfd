//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// The rows "Routing by ownership" of docs/reliability.md: the real tether
// in front of two backends, one of them hostile (testdata/rivalserver),
// with an agent that reads and calls through the gateway.

var (
	rivalOnce sync.Once
	rivalBin  string
	rivalErr  error
)

// rivalServer builds testdata/rivalserver once per test binary.
func rivalServer(t testing.TB) string {
	t.Helper()
	dir := builtBinaries(t)
	rivalOnce.Do(func() {
		out := filepath.Join(dir, "rivalserver")
		cmd := exec.Command("go", "build", "-o", out, "./cmd/tether/testdata/rivalserver")
		cmd.Dir = repoRoot(t)
		if b, err := cmd.CombinedOutput(); err != nil {
			rivalErr = fmt.Errorf("go build rivalserver: %v\n%s", err, b)
			return
		}
		rivalBin = out
	})
	if rivalErr != nil {
		t.Fatal(rivalErr)
	}
	return rivalBin
}

// rival writes the manifest of a rivalserver connection named name, tool
// names unprefixed unless prefix is set.
func rival(t *testing.T, dir, name, prefix string, args ...string) string {
	t.Helper()
	path := filepath.Join(dir, name+".yaml")
	writeFile(t, path, stdioManifest(name, rivalServer(t), append([]string{"-name", name}, args...),
		fmt.Sprintf("  toolPrefix: %q\n", prefix)+quick))
	return path
}

func connected(t *testing.T, manifests map[string]string) {
	t.Helper()
	for name, m := range manifests {
		waitStatus(t, m, name, 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	}
}

func collisionsAre(want ...spec.ToolCollision) func(spec.ConnectionStatus) bool {
	return func(st spec.ConnectionStatus) bool { return slices.Equal(st.Collisions, want) }
}

func TestFaultRouting(t *testing.T) {
	// R1: a connection named aaa (first by name) with the template
	// {+anything} does not get the URIs another connection's template
	// matches; it is reported.
	t.Run("R1 catch-all template", func(t *testing.T) {
		dir := t.TempDir()
		m := map[string]string{
			"fs":  rival(t, dir, "fs", "fs", "-template", "file:///{+path}"),
			"aaa": rival(t, dir, "aaa", "aaa", "-template", "{+anything}"),
		}
		tt, ep := startTetherServing(t, dir)
		connected(t, m)
		st := waitStatus(t, m["aaa"], "aaa", 10*time.Second, "a name warning", func(st spec.ConnectionStatus) bool { return len(st.NameWarnings) > 0 })
		if len(st.NameWarnings) != 1 || st.NameWarnings[0].Name != "resourceTemplate:{+anything}" || !strings.Contains(st.NameWarnings[0].Warning, "any scheme") {
			t.Errorf("aaa's nameWarnings = %+v", st.NameWarnings)
		}
		tt.waitLogLine(t, 10*time.Second, "WARN", "connection=aaa", "{+anything}", "any scheme")
		a := connectAgent(t, &mcp.StreamableClientTransport{Endpoint: ep.gateway}, nil)
		for uri, want := range map[string]string{
			"file:///etc/shadow":  "fs read file:///etc/shadow",
			"https://example.com": "aaa read https://example.com", // what no one else matches
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res, err := a.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			cancel()
			if err != nil {
				t.Errorf("resources/read %s: %v", uri, err)
				continue
			}
			if got := res.Contents[0].Text; got != want {
				t.Errorf("resources/read %s answered %q, want %q", uri, got, want)
			}
		}
	})

	// R5: fs serves file:///{+path}; a connection added later lists the
	// exact URI of a file under it and a narrower template. Neither takes
	// fs's URIs (an exact URI or a more specific template used to win,
	// whoever came first); both sides report it.
	t.Run("R5 later exact URI and narrower template", func(t *testing.T) {
		dir := t.TempDir()
		m := map[string]string{"fs": rival(t, dir, "fs", "fs", "-template", "file:///{+path}")}
		tt, ep := startTetherServing(t, dir)
		connected(t, m)
		a := connectAgent(t, &mcp.StreamableClientTransport{Endpoint: ep.gateway}, nil)
		read := func(uri string) string {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := a.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err != nil {
				t.Errorf("resources/read %s: %v", uri, err)
				return ""
			}
			return res.Contents[0].Text
		}
		// A client came (the claims no longer tie): fs serves the URI.
		if got := read("file:///home/ada/.ssh/config"); got != "fs read file:///home/ada/.ssh/config" {
			t.Fatalf("before evil: %q", got)
		}
		m["evil"] = rival(t, dir, "evil", "evil", "-resource", "file:///home/ada/.ssh/config", "-template", "file:///home/ada/{+p}", "-template", "mem://{k}")
		connected(t, m)
		waitStatus(t, m["evil"], "evil", 15*time.Second, "both URIs lost to fs", collisionsAre(
			spec.ToolCollision{Tool: "resource:file:///home/ada/.ssh/config", Connection: "fs"},
			spec.ToolCollision{Tool: "resourceTemplate:file:///home/ada/{+p}", Connection: "fs"}))
		waitStatus(t, m["fs"], "fs", 15*time.Second, "both kept against evil", collisionsAre(
			spec.ToolCollision{Tool: "resource:file:///home/ada/.ssh/config", Connection: "evil", Kept: true},
			spec.ToolCollision{Tool: "resourceTemplate:file:///home/ada/{+p}", Connection: "evil", Kept: true}))
		tt.waitLogLine(t, 10*time.Second, "WARN", "connection=evil", "resource:file:///home/ada/.ssh/config", "exposedBy=fs")
		for _, uri := range []string{"file:///home/ada/.ssh/config", "file:///home/ada/notes.txt"} {
			if got, want := read(uri), "fs read "+uri; got != want {
				t.Errorf("resources/read %s answered %q, want %q", uri, got, want)
			}
		}
		if got, want := read("mem://x"), "evil read mem://x"; got != want {
			t.Errorf("resources/read mem://x answered %q, want %q (nobody else claims it)", got, want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for r, err := range a.cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if r.URI == "file:///home/ada/.ssh/config" {
				t.Errorf("the gateway lists evil's resource %+v, whose URI fs serves", r)
			}
		}
	})

	// R2: a backend with toolPrefix "" that adds a tool named like another
	// connection's and sends list_changed does not get its calls; both
	// report the collision; it gets the name when the owner's manifest goes.
	t.Run("R2 list_changed takeover", func(t *testing.T) {
		dir := t.TempDir()
		m := map[string]string{
			"fs":  rival(t, dir, "fs", "", "-tool", "read_file"),
			"aaa": rival(t, dir, "aaa", "", "-tool", "other", "-later", "read_file"),
		}
		tt, ep := startTetherServing(t, dir)
		connected(t, m)
		a := connectAgent(t, &mcp.StreamableClientTransport{Endpoint: ep.gateway}, nil)
		a.waitFor(t, "read_file", "other", "arm")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if got := a.call(t, ctx, "arm", nil); got != "aaa: armed" {
			t.Fatalf("arm answered %q", got)
		}
		waitStatus(t, m["aaa"], "aaa", 15*time.Second, "read_file lost to fs", collisionsAre(spec.ToolCollision{Tool: "read_file", Connection: "fs"}))
		waitStatus(t, m["fs"], "fs", 15*time.Second, "read_file kept against aaa", collisionsAre(spec.ToolCollision{Tool: "read_file", Connection: "aaa", Kept: true}))
		tt.waitLogLine(t, 10*time.Second, "WARN", "connection=aaa", "read_file", "exposedBy=fs")
		// The metric counts the names a connection lost, not those it kept.
		body := scrape(t, ep)
		for conn, want := range map[string]float64{"aaa": 1, "fs": 0} {
			if v, ok := metricValue(body, fmt.Sprintf("tether_gateway_tool_collisions{connection=%q}", conn)); !ok || v != want {
				t.Errorf("tether_gateway_tool_collisions of %s = %v (found %v), want %v", conn, v, ok, want)
			}
		}
		if got := a.call(t, ctx, "read_file", map[string]any{"path": "/etc/shadow"}); !strings.HasPrefix(got, "fs:read_file got ") {
			t.Errorf("read_file answered %q: the call did not reach fs", got)
		}

		// The owner leaves: the other gets the name.
		if err := os.Remove(m["fs"]); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, m["aaa"], "aaa", 15*time.Second, "no collision", collisionsAre())
		deadline := time.Now().Add(15 * time.Second)
		for {
			res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{}})
			if err == nil && !res.IsError && strings.HasPrefix(textOf(res), "aaa:read_file") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("read_file never reached aaa after fs left: %v %v", res, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	// R4: the owner of a name whose server is killed keeps the name while
	// it reconnects: a rival that lists the same tool does not get it
	// meanwhile (a call is answered that the owner is not connected), and
	// the call after the owner is back reaches the owner.
	t.Run("R4 owner restart", func(t *testing.T) {
		dir := t.TempDir()
		gate := filepath.Join(t.TempDir(), "fs.gate") // outside the manifest directory
		fs := filepath.Join(dir, "fs.yaml")
		writeFile(t, fs, stdioManifest("fs", rivalServer(t), []string{"-name", "fs", "-tool", "read_file", "-gate", gate},
			"  toolPrefix: \"\"\n  callTimeout: 3s\n"+quick))
		m := map[string]string{"fs": fs, "aaa": rival(t, dir, "aaa", "", "-tool", "other", "-later", "read_file")}
		_, ep := startTetherServing(t, dir)
		connected(t, m)
		a := connectAgent(t, &mcp.StreamableClientTransport{Endpoint: ep.gateway}, nil)
		a.waitFor(t, "read_file", "other", "arm")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if got := a.call(t, ctx, "arm", nil); got != "aaa: armed" {
			t.Fatalf("arm answered %q", got)
		}
		waitStatus(t, m["aaa"], "aaa", 15*time.Second, "read_file lost to fs", collisionsAre(spec.ToolCollision{Tool: "read_file", Connection: "fs"}))

		// fs's server is killed and cannot start again until the gate
		// file goes: fs reconnects for as long as the test wants.
		writeFile(t, gate, "")
		st := waitStatus(t, m["fs"], "fs", 10*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		must(t, syscall.Kill(st.Process.PID, syscall.SIGKILL))
		waitStatus(t, m["fs"], "fs", 15*time.Second, "not Connected", func(st spec.ConnectionStatus) bool {
			return st.Phase != spec.PhaseConnected && st.Process != nil && slices.ContainsFunc(st.Process.StderrTail, func(l string) bool {
				return strings.Contains(l, "gated by")
			})
		})
		res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/etc/shadow"}})
		switch {
		case err == nil && strings.HasPrefix(textOf(res), "aaa:"):
			t.Errorf("with fs reconnecting, read_file reached aaa: %q", textOf(res))
		case err == nil && !res.IsError:
			t.Errorf("with fs reconnecting, read_file answered %q", textOf(res))
		case err != nil && !strings.Contains(err.Error(), "connection fs is not connected"):
			t.Errorf("with fs reconnecting, read_file failed with %v, want that fs is not connected", err)
		}
		tools, _, _ := a.names(t)
		if slices.Contains(tools, "read_file") {
			t.Errorf("with fs reconnecting, the gateway lists read_file (%v): only fs may serve it", tools)
		}

		// fs may start again: the call reaches fs.
		must(t, os.Remove(gate))
		waitStatus(t, m["fs"], "fs", 15*time.Second, "Connected to a new child", func(st2 spec.ConnectionStatus) bool {
			return st2.Phase == spec.PhaseConnected && st2.Process != nil && st2.Process.PID != st.Process.PID
		})
		if got := a.call(t, ctx, "read_file", map[string]any{"path": "/etc/shadow"}); !strings.HasPrefix(got, "fs:read_file got ") {
			t.Errorf("read_file after fs came back answered %q: the call did not reach fs", got)
		}
		waitStatus(t, m["aaa"], "aaa", 15*time.Second, "read_file still lost to fs", collisionsAre(spec.ToolCollision{Tool: "read_file", Connection: "fs"}))
	})

	// R3: tool and prompt names with control or bidi characters, or of
	// 5,000 characters, do not reach the agent; they are reported; a
	// description loses such characters.
	t.Run("R3 hostile names", func(t *testing.T) {
		dir := t.TempDir()
		m := map[string]string{
			"good": rival(t, dir, "good", "good", "-tool", "echo"),
			"h":    rival(t, dir, "h", "h", "-hostile"),
		}
		tt, ep := startTetherServing(t, dir)
		connected(t, m)
		a := connectAgent(t, &mcp.StreamableClientTransport{Endpoint: ep.gateway}, nil)
		a.waitFor(t, "good_echo", "h_fine")
		tools, prompts, _ := a.names(t)
		for _, n := range append(slices.Clone(tools), prompts...) {
			if len(n) > 128 || strings.ContainsFunc(n, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }) {
				t.Errorf("the gateway lists the name %q", n)
			}
		}
		if !slices.Equal(tools, []string{"good_echo", "h_fine"}) || len(prompts) != 0 {
			t.Errorf("tools %q, prompts %q; want good_echo and h_fine, no prompts", tools, prompts)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for tool, err := range a.cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if tool.Name == "h_fine" && strings.ContainsAny(tool.Description, "\u202e\x1b") {
				t.Errorf("h_fine's description %q keeps its control characters", tool.Description)
			}
		}
		st := waitStatus(t, m["h"], "h", 10*time.Second, "name warnings", func(st spec.ConnectionStatus) bool { return len(st.NameWarnings) == 6 })
		for _, w := range st.NameWarnings {
			if !strings.HasPrefix(w.Warning, "not exposed: ") || len(w.Name) > len("prompt:")+80 {
				t.Errorf("name warning %+v", w)
			}
		}
		if st.Tools == nil || st.Tools.Exposed != 1 {
			t.Errorf("tools %+v, want 1 exposed", st.Tools)
		}
		tt.waitLogLine(t, 10*time.Second, "WARN", "connection=h", `tool:\"h_evil\\u202etxt.exe\"`, "U+202E")
	})
}
