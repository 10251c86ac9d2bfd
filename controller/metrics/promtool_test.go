package metrics

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/controller/httpguard"
)

// promtool returns the path of promtool, skipping the test when it is not
// installed (failing under CI=true, where it must be).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool is not installed (apt-get install prometheus): %v", err)
		}
		t.Skip("promtool is not installed (apt-get install prometheus)")
	}
	return p
}

// TestPromtoolCheckMetrics serves the scenario's metrics on a real listener,
// scrapes them over HTTP as Prometheus would, and has promtool lint them.
func TestPromtoolCheckMetrics(t *testing.T) {
	bin := promtool(t)
	m, clk := newTestMetrics(scenarioStart)
	playScenario(m, clk)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ServeListener(ctx, ln, m.Handler(nil, httpguard.Origins{})) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, []byte("tether_connection_up{")) {
		t.Fatalf("the scrape lacks tether_connection_up:\n%s", body)
	}

	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
