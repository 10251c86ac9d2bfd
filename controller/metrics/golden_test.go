package metrics

import (
	"bufio"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tether-mcp/tether/controller/httpguard"
	"github.com/tether-mcp/tether/spec"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// scenarioStart is the fixed wall-clock time the scenario starts at.
var scenarioStart = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// playScenario drives m through a fixed story that touches every metric:
// a connection that fails once and then serves calls, a suspended one, an
// invalid one, one that comes and goes, manifest errors that get fixed, and
// the workqueue.
func playScenario(m *Metrics, clk *fakeClock) {
	at := func(d time.Duration) { clk.set(scenarioStart.Add(d)) }

	at(0)
	for _, n := range []string{"github", "memory", "broken", "gone"} {
		m.ConnectionAdded(n)
	}
	m.SetManifestErrors("broken.yaml", 2)
	m.SetManifestErrors("fixed.yaml", 1)

	at(1 * time.Second)
	m.SetPhase("github", spec.PhaseConnecting)
	m.SetPhase("memory", spec.PhaseSuspended)
	m.SetPhase("broken", spec.PhaseInvalid)
	m.SetPhase("gone", spec.PhaseConnecting)
	m.ObserveReconcile(ReconcileRequeue, 200*time.Microsecond)

	at(2 * time.Second)
	m.ObserveAttempt("github", false)
	m.SetPhase("github", spec.PhaseReconnecting)
	m.ObserveAttempt("gone", true)
	m.SetPhase("gone", spec.PhaseConnected)
	m.ObserveCall("gone", CallOK, 3*time.Millisecond)
	m.SetManifestErrors("fixed.yaml", 0)
	m.ObserveReconcile(ReconcileError, 5*time.Millisecond)

	at(3 * time.Second)
	m.SetPhase("github", spec.PhaseConnecting)
	m.ObserveAttempt("github", true)

	at(4 * time.Second)
	m.SetPhase("github", spec.PhaseConnected)
	m.SetTools("github", 40)
	m.SetCollisions("github", 1)
	m.ObserveHealthCheck("github", 3*time.Millisecond)
	m.ObserveHealthCheck("github", 12*time.Millisecond)
	m.ObserveCall("github", CallOK, 2*time.Millisecond)
	m.ObserveCall("github", CallOK, 150*time.Millisecond)
	m.ObserveCall("github", CallError, 30*time.Millisecond)
	m.ObserveCall("github", CallTimeout, 60*time.Second)
	m.ObserveCall("stranger", CallOK, time.Millisecond) // not a connection: ignored
	for range 3 {
		m.ObserveReconcile(ReconcileSuccess, time.Millisecond)
	}

	at(5 * time.Second)
	m.ConnectionRemoved("gone")

	p := m.QueueProvider()
	depth := p.NewDepthMetric("connections")
	depth.Inc()
	depth.Inc()
	depth.Dec()
	adds := p.NewAddsMetric("connections")
	adds.Inc()
	adds.Inc()
	p.NewLatencyMetric("connections").Observe(0.001)
	p.NewWorkDurationMetric("connections").Observe(0.002)
	p.NewUnfinishedWorkSecondsMetric("connections").Set(0)
	p.NewLongestRunningProcessorSecondsMetric("connections").Set(0)
	p.NewRetriesMetric("connections").Inc()
}

// scrape fetches path from h, with accept as the Accept header when set.
func scrape(t *testing.T, h http.Handler, path, accept string) (*http.Response, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

var goVersionLabel = regexp.MustCompile(`goversion="[^"]*"`)

// tetherOnly keeps the families tether defines (tether_*, workqueue_*) and
// drops the Go and process collectors, whose values change on every run; it
// replaces the Go version, which changes with the toolchain.
func tetherOnly(exposition string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(exposition))
	for sc.Scan() {
		line := sc.Text()
		name := line
		if f := strings.Fields(line); strings.HasPrefix(line, "# ") && len(f) > 2 {
			name = f[2]
		}
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		b.WriteString(goVersionLabel.ReplaceAllString(line, `goversion="GOVERSION"`))
		b.WriteByte('\n')
	}
	return b.String()
}

func TestMetricsGolden(t *testing.T) {
	m, clk := newTestMetrics(scenarioStart)
	playScenario(m, clk)

	resp, body := scrape(t, m.Handler(nil, httpguard.Origins{}), "/metrics", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	got := tetherOnly(body)

	golden := filepath.Join("testdata", "metrics.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./controller/metrics -run TestMetricsGolden -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("/metrics differs from %s (rerun with -update if the change is intended):\n%s", golden, lineDiff(string(want), got))
	}
	if !strings.Contains(body, "go_goroutines ") || !strings.Contains(body, "process_start_time_seconds ") {
		t.Errorf("/metrics lacks the Go or process collector")
	}
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	count := map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(got, "\n") {
		count[l]--
	}
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if count[l] > 0 {
			b.WriteString("- " + l + "\n")
			count[l]--
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if count[l] < 0 {
			b.WriteString("+ " + l + "\n")
			count[l]++
		}
	}
	return b.String()
}

func TestMetricsNegotiatesOpenMetrics(t *testing.T) {
	m, clk := newTestMetrics(scenarioStart)
	playScenario(m, clk)
	for _, tc := range []struct {
		accept, contentType, ending string
	}{
		{"", "text/plain; version=0.0.4", "\n"},
		{"application/openmetrics-text; version=1.0.0", "application/openmetrics-text; version=1.0.0", "# EOF\n"},
	} {
		resp, body := scrape(t, m.Handler(nil, httpguard.Origins{}), "/metrics", tc.accept)
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.contentType) {
			t.Errorf("Accept %q: Content-Type %q, want %q…", tc.accept, ct, tc.contentType)
		}
		if !strings.HasSuffix(body, tc.ending) {
			t.Errorf("Accept %q: body does not end with %q", tc.accept, tc.ending)
		}
		if !strings.Contains(body, `tether_connection_state{connection="github",state="connected"} 1`) {
			t.Errorf("Accept %q: body lacks github's connected state", tc.accept)
		}
	}
}
