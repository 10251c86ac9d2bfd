//go:build unix

package main

// Helpers of the fault tests (fault_*_test.go, the rows of
// docs/reliability.md): a misbehaving MCP server built from
// testdata/faultserver, a tether with its gateway and metrics on, and waits
// on logs, metrics and processes.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// faultServer builds testdata/faultserver once per test binary and returns
// its path.
func faultServer(t testing.TB) string {
	t.Helper()
	return testdataServer(t, "faultserver")
}

// testdataServers holds, per name, the build of cmd/tether/testdata/NAME:
// each is built once per test binary, beside builtBinaries'.
var testdataServers sync.Map // name → *testdataBuild

type testdataBuild struct {
	once sync.Once
	bin  string
	err  error
}

// testdataServer builds cmd/tether/testdata/NAME once per test binary and
// returns its path.
func testdataServer(t testing.TB, name string) string {
	t.Helper()
	dir := builtBinaries(t)
	v, _ := testdataServers.LoadOrStore(name, &testdataBuild{})
	b := v.(*testdataBuild)
	b.once.Do(func() {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, "./cmd/tether/testdata/"+name)
		cmd.Dir = repoRoot(t)
		if o, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", name, err, o)
			return
		}
		b.bin = out
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// faultManifest is a stdio manifest that runs the fault server with args.
func faultManifest(t testing.TB, name string, args []string, extra string) string {
	return stdioManifest(name, faultServer(t), args, extra)
}

// Manifest settings that keep fault tests short: failures are noticed
// within about a second and retries stay under a second apart.
const (
	quickHealth  = "  healthCheck: {interval: 200ms, timeout: 300ms, failureThreshold: 2}\n"
	quickBackoff = "  backoff: {initial: 50ms, max: 500ms}\n"
	quick        = quickHealth + quickBackoff
)

// endpoints are the addresses of a tether started with startTetherServing.
type endpoints struct {
	gateway string // http://127.0.0.1:port/mcp
	metrics string // http://127.0.0.1:port
}

// startTetherServing starts tether with its gateway and metrics listeners
// on free loopback ports and waits for both.
func startTetherServing(t *testing.T, dir string, extra ...string) (*tether, endpoints) {
	t.Helper()
	gw, mp := testport.Free(t), testport.Free(t)
	args := append([]string{"--listen", fmt.Sprintf("127.0.0.1:%d", gw), "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", mp)}, extra...)
	tt := startTether(t, dir, args...)
	waitTCP(t, gw, 20*time.Second)
	waitTCP(t, mp, 20*time.Second)
	return tt, endpoints{
		gateway: fmt.Sprintf("http://127.0.0.1:%d/mcp", gw),
		metrics: fmt.Sprintf("http://127.0.0.1:%d", mp),
	}
}

// waitLog waits until tether's log contains substr.
func (tt *tether) waitLog(t testing.TB, timeout time.Duration, substr string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(tt.logs.String(), substr) {
		if time.Now().After(deadline) {
			t.Fatalf("tether never logged %q within %v", substr, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLogLine waits until one line of tether's log contains every part.
func (tt *tether) waitLogLine(t testing.TB, timeout time.Duration, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, line := range strings.Split(tt.logs.String(), "\n") {
			if containsAll(line, parts...) {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("tether never logged a line with %q within %v", parts, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// scrape returns the text of /metrics.
func scrape(t testing.TB, ep endpoints) string {
	t.Helper()
	code, body, err := get(ep.metrics + "/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	return body
}

// metricValue returns the value of the series whose line starts with
// series (name and labels exactly as exposed), or false.
func metricValue(body, series string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, series+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		return v, err == nil
	}
	return 0, false
}

// connectClient opens a go-sdk client session to tether's gateway.
func connectClient(t *testing.T, ep endpoints) *mcp.ClientSession {
	t.Helper()
	return connectGateway(t, &mcp.StreamableClientTransport{Endpoint: ep.gateway}).session
}

// call calls a tool through s, bounded by timeout.
func call(s *mcp.ClientSession, timeout time.Duration, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
}

// liveProcs lists the live processes (not zombies) whose /proc/<pid>/stat
// fields after the command name (state, ppid, pgrp, …) satisfy keep.
func liveProcs(keep func(fields []string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if keep(f) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// groupMembers lists the live processes of process group pgid.
func groupMembers(pgid int) []int {
	return liveProcs(func(f []string) bool { pg, _ := strconv.Atoi(f[2]); return pg == pgid })
}

// childrenOf lists the live children of pid.
func childrenOf(pid int) []int {
	return liveProcs(func(f []string) bool { ppid, _ := strconv.Atoi(f[1]); return ppid == pid })
}

// childWithArg waits for the child of pid whose command line has arg and
// returns its pid.
func childWithArg(t testing.TB, pid int, arg string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, c := range childrenOf(pid) {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
			if slices.Contains(strings.Split(string(b), "\x00"), arg) {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no child of %d runs with %s", pid, arg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rssKB returns the resident set size of pid in kB.
func rssKB(t testing.TB, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(rest)[0])
			return n
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}

// killAtCleanup makes sure a process a test made stray is gone at the end.
func killAtCleanup(t testing.TB, pid int) {
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
}

// readAll reads a response body and closes it.
func readAll(r io.ReadCloser) string {
	defer r.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}

// statusOK is a waitStatus predicate on phase and a lastError substring.
func statusOK(phase spec.Phase, errPart string) func(spec.ConnectionStatus) bool {
	return func(st spec.ConnectionStatus) bool {
		return st.Phase == phase && strings.Contains(st.LastError, errPart)
	}
}
