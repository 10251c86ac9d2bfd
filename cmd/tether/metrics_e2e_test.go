//go:build unix

package main

// The metrics end to end: a real Prometheus scrapes a running tether, a real
// backend dies, and the project's own McpConnectionDown rule fires.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// lookTool returns the path of a Prometheus tool, skipping the test when it
// is not installed (failing under CI=true, where it must be).
func lookTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed (apt-get install prometheus): %v", name, err)
		}
		t.Skipf("%s is not installed (apt-get install prometheus)", name)
	}
	return p
}

// shortForRules reads the project's alerting rules and returns them with
// every `for:` shortened to d, so a test can see them fire in seconds. The
// expressions, labels and annotations are the real ones.
func shortForRules(t *testing.T, d time.Duration) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "prometheus", "tether-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string           `json:"name"`
			Rules []map[string]any `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatalf("tether-alerts.yaml: %v", err)
	}
	found := false
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if _, ok := r["for"]; ok {
				r["for"] = d.String()
			}
			if r["alert"] == "McpConnectionDown" {
				found = true
			}
		}
	}
	if !found {
		t.Fatal("tether-alerts.yaml has no McpConnectionDown rule")
	}
	out, err := yaml.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// promServer is a running Prometheus server with its own storage.
type promServer struct {
	base string
	logs *syncBuffer
}

func startPrometheus(t *testing.T, target string, rules []byte) *promServer {
	t.Helper()
	bin := lookTool(t, "prometheus")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "rules.yaml"), string(rules))
	writeFile(t, filepath.Join(dir, "prometheus.yml"), fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: tether
    static_configs:
      - targets: [%q]
`, target))
	port := testport.Free(t)
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--log.level=warn")
	cmd.SysProcAttr = backendSysProcAttr()
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus logs:\n%s", logs.String())
		}
	})
	p := &promServer{base: fmt.Sprintf("http://127.0.0.1:%d", port), logs: logs}
	waitFor(t, 30*time.Second, "prometheus ready", func() (bool, string) {
		code, body, err := get(p.base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		return code == http.StatusOK, body
	})
	return p
}

// query evaluates an instant PromQL query and returns its vector result.
func (p *promServer) query(q string) ([]promSample, error) {
	_, body, err := get(p.base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return nil, fmt.Errorf("query %s: %v: %s", q, err, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, r.Error)
	}
	return r.Data.Result, nil
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func (p *promServer) alerts() ([]promAlert, error) {
	_, body, err := get(p.base + "/api/v1/alerts")
	if err != nil {
		return nil, err
	}
	var r struct {
		Data struct {
			Alerts []promAlert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return nil, fmt.Errorf("alerts: %v: %s", err, body)
	}
	return r.Data.Alerts, nil
}

func get(u string) (int, string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitFor polls cond until it holds, failing after timeout with the last
// thing cond reported.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMetricsAlertOnDeadBackend drives the whole path from a dead server to
// an alert: tether connects to a real HTTP MCP server and exports metrics; a
// real Prometheus scrapes them and evaluates the project's rule file; the
// server is killed; McpConnectionDown fires for that connection. Then the
// manifest is removed and the connection's series go with it.
func TestMetricsAlertOnDeadBackend(t *testing.T) {
	promtool := lookTool(t, "promtool")
	lookTool(t, "prometheus")
	bin := builtBinaries(t)

	port := testport.Free(t)
	backend := startServer(t, nil, filepath.Join(bin, "everything-server"), fmt.Sprintf("-http=127.0.0.1:%d", port))
	waitTCP(t, port, 20*time.Second)

	dir := t.TempDir()
	manifest := filepath.Join(dir, "backend.yaml")
	writeFile(t, manifest, httpManifest("backend", fmt.Sprintf("http://127.0.0.1:%d/mcp", port), "streamable",
		"  healthCheck: {interval: 200ms, timeout: 500ms, failureThreshold: 1}\n"))
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testport.Free(t))
	startTether(t, dir, "--metrics-addr", metricsAddr)
	waitStatus(t, manifest, "backend", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))

	// The admin endpoints of the real binary.
	for _, ep := range []string{"/healthz", "/readyz"} {
		waitFor(t, 10*time.Second, ep+" answers 200", func() (bool, string) {
			code, body, err := get("http://" + metricsAddr + ep)
			return err == nil && code == http.StatusOK, fmt.Sprint(code, " ", body, " ", err)
		})
	}

	// Its /metrics, as scraped, passes promtool's lint.
	_, exposition, err := get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(exposition, `tether_connection_up{connection="backend"} 1`) {
		t.Fatalf("/metrics does not show backend up:\n%s", exposition)
	}
	lint := exec.Command(promtool, "check", "metrics")
	lint.Stdin = strings.NewReader(exposition)
	if out, err := lint.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("promtool check metrics on tether's /metrics: %v\n%s", err, out)
	}

	prom := startPrometheus(t, metricsAddr, shortForRules(t, 2*time.Second))
	// Prometheus' first scrape comes a few seconds after it starts.
	waitFor(t, 30*time.Second, "Prometheus sees backend up", func() (bool, string) {
		s, err := prom.query(`tether_connection_up{job="tether",connection="backend"} == 1`)
		return err == nil && len(s) == 1, fmt.Sprint(s, err)
	})
	// Until the first scrape, absent(up) holds and TetherDown (with its
	// shortened for:) may fire; once the rules saw a scrape, nothing may.
	waitFor(t, 15*time.Second, "no alert active while everything is up", func() (bool, string) {
		alerts, err := prom.alerts()
		return err == nil && len(alerts) == 0, fmt.Sprintf("%+v %v", alerts, err)
	})

	_ = syscall.Kill(-backend.Process.Pid, syscall.SIGKILL)
	waitStatus(t, manifest, "backend", 15*time.Second, "not Connected", func(st spec.ConnectionStatus) bool {
		return st.Phase != spec.PhaseConnected && st.Phase != spec.PhaseDegraded
	})
	waitFor(t, 30*time.Second, "McpConnectionDown firing for backend", func() (bool, string) {
		alerts, err := prom.alerts()
		if err != nil {
			return false, err.Error()
		}
		for _, a := range alerts {
			if a.Labels["alertname"] == "McpConnectionDown" && a.Labels["connection"] == "backend" && a.State == "firing" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", alerts)
	})
	// The dead server is the only problem: nothing else fires.
	alerts, err := prom.alerts()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts {
		if a.Labels["alertname"] != "McpConnectionDown" {
			t.Errorf("unexpected alert %s (%s): %v", a.Labels["alertname"], a.State, a.Labels)
		}
	}

	// A removed manifest takes its connection's series along.
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "backend's series gone from /metrics", func() (bool, string) {
		_, body, err := get("http://" + metricsAddr + "/metrics")
		return err == nil && !strings.Contains(body, `connection="backend"`), fmt.Sprint(err)
	})
}
