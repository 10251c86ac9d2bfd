//go:build unix

package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// TestFaultHangs: servers that stop answering, before initialize or after
// it, over stdio and HTTP, and a tool slower than its callTimeout
// (docs/reliability.md, rows S10–S14). A server that hangs before
// initialize is given the connect timeout, here --connect-timeout 5s, so
// this test runs beside the others.
func TestFaultHangs(t *testing.T) {
	const connectTimeout = 5 * time.Second
	t.Parallel()
	dir := t.TempDir()
	fs := faultServer(t)

	// An HTTP server that accepts every request and never answers.
	release := make(chan struct{})
	mute := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(mute.Close)
	t.Cleanup(func() { close(release) }) // runs before mute.Close

	httpPort := testport.Free(t)
	httpSrv := startServer(t, nil, fs, "-http", fmt.Sprintf("127.0.0.1:%d", httpPort))
	waitTCP(t, httpPort, 20*time.Second)

	manifests := map[string]string{
		"stop-before-init": faultManifest(t, "stop-before-init", []string{"-stop-at-start"}, quick),
		"stop-after-init":  faultManifest(t, "stop-after-init", nil, quick),
		"http-stop":        httpManifest("http-stop", fmt.Sprintf("http://127.0.0.1:%d/mcp", httpPort), "streamable", quick),
		"http-mute":        httpManifest("http-mute", mute.URL+"/mcp", "streamable", quick),
		"slow-tool":        faultManifest(t, "slow-tool", nil, quick+"  callTimeout: 1s\n"),
	}
	for name, m := range manifests {
		writeFile(t, filepath.Join(dir, name+".yaml"), m)
	}
	start := time.Now()
	tt, ep := startTetherServing(t, dir, "--connect-timeout", connectTimeout.String())
	path := func(name string) string { return filepath.Join(dir, name+".yaml") }

	// The long rows start first; their bound runs while the others are checked.
	st := waitStatus(t, path("stop-before-init"), "stop-before-init", 10*time.Second, "Connecting", phaseIs(spec.PhaseConnecting))
	if c := st.Conditions[1]; c.Type != spec.ConditionReconciling || c.Status != spec.ConditionTrue {
		t.Errorf("Reconciling = %+v while connecting, want True", c)
	}
	waitStatus(t, path("http-mute"), "http-mute", 10*time.Second, "Connecting", phaseIs(spec.PhaseConnecting))
	stoppedChild := childWithArg(t, tt.cmd.Process.Pid, "-stop-at-start")
	killAtCleanup(t, stoppedChild)

	t.Run("S11 stdio server stopped after initialize", func(t *testing.T) {
		st := waitStatus(t, path("stop-after-init"), "stop-after-init", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		pid := st.Process.PID
		killAtCleanup(t, pid)
		must(t, syscall.Kill(pid, syscall.SIGSTOP))
		stopped := time.Now()
		// interval 200ms × threshold 2, each probe bounded by 300ms.
		waitStatus(t, path("stop-after-init"), "stop-after-init", 5*time.Second, "not Connected",
			func(st spec.ConnectionStatus) bool { return st.Phase != spec.PhaseConnected })
		t.Logf("a stopped stdio server left Connected after %v", time.Since(stopped).Round(time.Millisecond))
		waitStatus(t, path("stop-after-init"), "stop-after-init", 15*time.Second, "Connected to a new child", func(st spec.ConnectionStatus) bool {
			return st.Phase == spec.PhaseConnected && st.Process.PID != pid
		})
		// The stopped child ignores stdin and SIGTERM; SIGKILL ends it
		// within the stop bound (2 s + 2 s + 1 s).
		if !processGone(pid, 10*time.Second) {
			t.Errorf("the stopped child %d is still there", pid)
		}
	})

	t.Run("S12 HTTP server stopped after initialize", func(t *testing.T) {
		waitStatus(t, path("http-stop"), "http-stop", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		must(t, syscall.Kill(httpSrv.Process.Pid, syscall.SIGSTOP))
		stopped := time.Now()
		st := waitStatus(t, path("http-stop"), "http-stop", 5*time.Second, "Reconnecting", phaseIs(spec.PhaseReconnecting))
		t.Logf("a stopped HTTP server left Connected after %v: %s", time.Since(stopped).Round(time.Millisecond), st.LastError)
		if !strings.Contains(st.LastError, "health check") && !strings.Contains(st.LastError, "timed out") {
			t.Errorf("lastError %q does not say the server stopped answering", st.LastError)
		}
		must(t, syscall.Kill(httpSrv.Process.Pid, syscall.SIGCONT))
		waitStatus(t, path("http-stop"), "http-stop", 15*time.Second, "Connected again", phaseIs(spec.PhaseConnected))
	})

	t.Run("S13 tool slower than callTimeout", func(t *testing.T) {
		waitStatus(t, path("slow-tool"), "slow-tool", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		s := connectClient(t, ep)
		begin := time.Now()
		res, err := call(s, 20*time.Second, "slow-tool_slow", map[string]any{"seconds": 30})
		took := time.Since(begin)
		if err == nil {
			t.Fatalf("a 30 s call under a 1 s callTimeout answered %+v", res)
		}
		if !strings.Contains(err.Error(), "timed out after 1s") {
			t.Errorf("error %q does not name the callTimeout", err)
		}
		if took > 3*time.Second {
			t.Errorf("the call took %v to time out (callTimeout 1s)", took)
		}
		// The backend's handler was cancelled, not left running.
		waitStatus(t, path("slow-tool"), "slow-tool", 10*time.Second, "the backend seeing the cancellation", func(st spec.ConnectionStatus) bool {
			return st.Process != nil && slices.Contains(st.Process.StderrTail, "slow call cancelled")
		})
		body := scrape(t, ep)
		if v, _ := metricValue(body, `tether_gateway_tool_calls_total{connection="slow-tool",result="timeout"}`); v != 1 {
			t.Errorf("tether_gateway_tool_calls_total{result=timeout} = %v, want 1", v)
		}
	})

	// Rows whose bound is the connect timeout.
	bound := connectTimeout + 15*time.Second - time.Since(start)
	t.Run("S10 stdio server stopped before initialize", func(t *testing.T) {
		st := waitStatus(t, path("stop-before-init"), "stop-before-init", bound, "the connect timeout",
			statusOK(spec.PhaseReconnecting, "connect timed out after "+connectTimeout.String()))
		t.Logf("gave up after %v: %s", time.Since(start).Round(time.Second), st.LastError)
		if !processGone(stoppedChild, 5*time.Second) {
			t.Errorf("the stopped child %d is still there after the attempt was abandoned", stoppedChild)
		}
	})
	t.Run("S14 HTTP server that never answers", func(t *testing.T) {
		waitStatus(t, path("http-mute"), "http-mute", bound, "the connect timeout",
			statusOK(spec.PhaseReconnecting, "connect timed out after "+connectTimeout.String()))
	})
}
