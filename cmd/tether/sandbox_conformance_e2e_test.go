//go:build linux

package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// TestConformanceThroughSandboxedServer runs the MCP conformance suite's
// server scenarios through tether's gateway against a stdio server confined
// by a policy that grants only what it needs, and requires every scenario
// the same server passes unconfined to pass confined (docs/security.md).
// The servers: the everything-server npm peer (its package tree and
// OpenSSL's configuration beside the named grants: the script, node through
// /usr/bin/env, their libraries, a TMPDIR, the common devices), and the
// go-sdk's conformance everything-server (the named grants alone), which
// has the tools most scenarios call. Neither gets a network.
func TestConformanceThroughSandboxedServer(t *testing.T) {
	requireSandbox(t)
	suite := npmPeer(t, "conformance")
	peersBin := filepath.Dir(suite)
	npmPeer(t, "node")
	everything := npmPeer(t, "mcp-server-everything")
	modules := filepath.Dir(filepath.Dir(everything))
	for _, server := range []struct {
		name, command string
		args          []string
		policy        string
		least         int // scenarios it passes unconfined, at least
	}{
		{"npm", everything, []string{"stdio"}, policyHere(fmt.Sprintf("read: [%q, /etc/ssl/openssl.cnf]", modules)), 8},
		{"go-sdk", filepath.Join(builtBinaries(t), "everything-server"), nil, policyHere(""), 20},
	} {
		t.Run(server.name, func(t *testing.T) {
			conformanceConfined(t, suite, peersBin, server.command, server.args, server.policy, server.least)
		})
	}
}

func conformanceConfined(t *testing.T, suite, peersBin, command string, args []string, policy string, least int) {
	outcomes := map[string]map[string]bool{}
	for _, mode := range []string{"unconfined", "confined"} {
		extra := "  toolPrefix: \"\"\n"
		if mode == "confined" {
			extra = policy + extra
		}
		dir := t.TempDir()
		m := filepath.Join(dir, "everything.yaml")
		writeFile(t, m, stdioManifest("everything", command, args, extra))
		gw := testport.Free(t)
		tt := startTether(t, dir, "--listen", fmt.Sprintf("127.0.0.1:%d", gw))
		waitTCP(t, gw, 20*time.Second)
		st := waitStatus(t, m, "everything", 60*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		_, suffix := bestEffortHere()
		if want := map[string]string{"unconfined": "", "confined": "landlock fs+netns none" + suffix}[mode]; st.Sandbox != want {
			t.Fatalf("%s: status.sandbox = %q, want %q", mode, st.Sandbox, want)
		}
		outcomes[mode], _ = runConformance(t, suite, peersBin, fmt.Sprintf("http://127.0.0.1:%d/mcp", gw))
		tt.stop()
	}
	var passed, lost []string
	for name, ok := range outcomes["unconfined"] {
		if ok {
			passed = append(passed, name)
			if !outcomes["confined"][name] {
				lost = append(lost, name)
			}
		}
	}
	slices.Sort(lost)
	if len(passed) < least {
		t.Fatalf("the unconfined server passes only %d scenarios through the gateway (of %d), want at least %d: the suite did not run as expected", len(passed), len(outcomes["unconfined"]), least)
	}
	t.Logf("conformance server scenarios through the gateway: unconfined %d/%d, confined lost %d", len(passed), len(outcomes["unconfined"]), len(lost))
	if len(lost) > 0 {
		t.Errorf("scenarios the unconfined server passes but the confined one fails: %s", strings.Join(lost, ", "))
	}
}
