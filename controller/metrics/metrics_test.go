package metrics

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/util/workqueue"

	"github.com/tether-mcp/tether/spec"
)

// fakeClock is a settable clock for last_transition_timestamp_seconds.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func newTestMetrics(t0 time.Time) (*Metrics, *fakeClock) {
	m := New("v0.0.0-test")
	clk := &fakeClock{t: t0}
	m.now = clk.now
	return m, clk
}

// seriesOf returns every gathered series (family name and label pairs) that
// carries connection=name.
func seriesOf(t *testing.T, m *Metrics, name string) []string {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			if labelValue(metric, "connection") == name {
				out = append(out, mf.GetName()+labelString(metric))
			}
		}
	}
	return out
}

// familyOf returns the gathered series of family, as a scrape sees them.
func familyOf(t *testing.T, m *Metrics, family string) []*dto.Metric {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == family {
			return mf.GetMetric()
		}
	}
	return nil
}

// value returns the value of the gauge or counter family{labelValues},
// label values in the order of their names; the test fails when the series
// does not exist.
func value(t *testing.T, m *Metrics, family string, labelValues ...string) float64 {
	t.Helper()
	for _, s := range familyOf(t, m, family) {
		var values []string
		for _, lp := range s.GetLabel() {
			values = append(values, lp.GetValue())
		}
		if slices.Equal(values, labelValues) {
			if s.Counter != nil {
				return s.GetCounter().GetValue()
			}
			return s.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s%q", family, labelValues)
	return 0
}

func labelValue(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

func labelString(m *dto.Metric) string {
	var parts []string
	for _, lp := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func TestConnectionAddedCreatesEverySeriesZeroed(t *testing.T) {
	m, _ := newTestMetrics(time.Unix(1000, 0))
	m.ConnectionAdded("github")

	got := seriesOf(t, m, "github")
	// up, tools, last transition, health histogram, call histogram,
	// collisions: 1 each; attempts: 2 results; calls: 4 results; catalog
	// changes: added and removed; state: one per phase.
	want := 6 + 2 + 4 + 2 + len(spec.Phases)
	if len(got) != want {
		t.Fatalf("ConnectionAdded created %d series, want %d:\n%s", len(got), want, strings.Join(got, "\n"))
	}
	for _, c := range []struct {
		name  string
		value float64
	}{
		{"up", value(t, m, "tether_connection_up", "github")},
		{"tools", value(t, m, "tether_connection_tools", "github")},
		{"attempts success", value(t, m, "tether_connection_attempts_total", "github", AttemptSuccess)},
		{"attempts failure", value(t, m, "tether_connection_attempts_total", "github", AttemptFailure)},
		{"calls timeout", value(t, m, "tether_gateway_tool_calls_total", "github", CallTimeout)},
		{"collisions", value(t, m, "tether_gateway_tool_collisions", "github")},
		{"state pending", value(t, m, "tether_connection_state", "github", "pending")},
		{"last transition", value(t, m, "tether_connection_last_transition_timestamp_seconds", "github")},
	} {
		want := 0.0
		switch c.name {
		case "state pending":
			want = 1
		case "last transition":
			want = 1000
		}
		if c.value != want {
			t.Errorf("%s = %v after ConnectionAdded, want %v", c.name, c.value, want)
		}
	}
}

func TestSetPhaseIsOneHot(t *testing.T) {
	for _, tc := range []struct {
		phase spec.Phase
		up    float64
	}{
		{spec.PhasePending, 0},
		{spec.PhaseConnecting, 0},
		{spec.PhaseConnected, 1},
		{spec.PhaseDegraded, 1},
		{spec.PhaseReconnecting, 0},
		{spec.PhaseSuspended, 0},
		{spec.PhaseInvalid, 0},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			m, _ := newTestMetrics(time.Unix(1000, 0))
			m.ConnectionAdded("c")
			// Go through another phase first so that Pending is a change too.
			m.SetPhase("c", spec.PhaseConnecting)
			m.SetPhase("c", tc.phase)
			if got := value(t, m, "tether_connection_up", "c"); got != tc.up {
				t.Errorf("tether_connection_up = %v, want %v", got, tc.up)
			}
			for _, p := range spec.Phases {
				want := 0.0
				if p == tc.phase {
					want = 1
				}
				label := strings.ToLower(string(p))
				if got := value(t, m, "tether_connection_state", "c", label); got != want {
					t.Errorf("tether_connection_state{state=%q} = %v, want %v", label, got, want)
				}
			}
		})
	}
}

func TestLastTransitionMovesOnlyWhenThePhaseChanges(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	m, clk := newTestMetrics(t0)
	ts := func() float64 { return value(t, m, "tether_connection_last_transition_timestamp_seconds", "c") }

	m.ConnectionAdded("c")
	steps := []struct {
		at    time.Duration
		phase spec.Phase
		want  time.Duration // offset from t0 the timestamp must show
	}{
		{1 * time.Second, spec.PhaseConnecting, 1 * time.Second},
		{2 * time.Second, spec.PhaseConnecting, 1 * time.Second}, // same phase: no transition
		{3 * time.Second, spec.PhaseConnected, 3 * time.Second},
		{4 * time.Second, spec.PhaseConnected, 3 * time.Second},
		{5 * time.Second, "Bogus", 3 * time.Second}, // unknown phase: ignored
		{6 * time.Second, spec.PhaseDegraded, 6 * time.Second},
	}
	for _, s := range steps {
		clk.set(t0.Add(s.at))
		m.SetPhase("c", s.phase)
		want := float64(t0.Add(s.want).Unix())
		if got := ts(); got != want {
			t.Errorf("after SetPhase(%s) at +%v: timestamp %v, want %v", s.phase, s.at, got, want)
		}
	}
	if got := value(t, m, "tether_connection_state", "c", "degraded"); got != 1 {
		t.Errorf("state degraded = %v, want 1", got)
	}
	// A second ConnectionAdded must not reset a known connection.
	m.ConnectionAdded("c")
	if got := value(t, m, "tether_connection_state", "c", "degraded"); got != 1 {
		t.Errorf("ConnectionAdded on a known connection reset its state (degraded = %v)", got)
	}
}

func TestConnectionRemovedDeletesOnlyItsSeries(t *testing.T) {
	m, _ := newTestMetrics(time.Unix(1000, 0))
	for _, n := range []string{"a", "b"} {
		m.ConnectionAdded(n)
		m.SetPhase(n, spec.PhaseConnected)
		m.SetTools(n, 3)
		m.ObserveAttempt(n, true)
		m.ObserveHealthCheck(n, 2*time.Millisecond)
		m.ObserveCall(n, CallOK, time.Millisecond)
		m.SetCollisions(n, 1)
	}
	before := len(seriesOf(t, m, "b"))

	m.ConnectionRemoved("a")
	if got := seriesOf(t, m, "a"); len(got) != 0 {
		t.Fatalf("series left after ConnectionRemoved(a):\n%s", strings.Join(got, "\n"))
	}
	if got := len(seriesOf(t, m, "b")); got != before {
		t.Errorf("removing a changed b's series: %d, want %d", got, before)
	}

	// Late observations (a probe or a call that outlived the connection)
	// must not bring the series back.
	m.SetPhase("a", spec.PhaseReconnecting)
	m.SetTools("a", 1)
	m.ObserveAttempt("a", false)
	m.ObserveHealthCheck("a", time.Millisecond)
	m.ObserveCall("a", CallError, time.Millisecond)
	m.SetCollisions("a", 2)
	if got := seriesOf(t, m, "a"); len(got) != 0 {
		t.Fatalf("late observations recreated removed series:\n%s", strings.Join(got, "\n"))
	}

	// Added again: fresh, zeroed series.
	m.ConnectionAdded("a")
	if got := value(t, m, "tether_connection_attempts_total", "a", AttemptSuccess); got != 0 {
		t.Errorf("re-added connection kept its old attempts count %v", got)
	}
}

func TestRemovalRacesWithObservations(t *testing.T) {
	m, _ := newTestMetrics(time.Unix(1000, 0))
	m.ConnectionAdded("c")
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range 200 {
				m.ObserveHealthCheck("c", time.Millisecond)
				m.ObserveCall("c", CallOK, time.Millisecond)
				m.SetTools("c", 2)
				m.SetPhase("c", spec.PhaseConnected)
				m.SetPhase("c", spec.PhaseDegraded)
			}
		}()
	}
	close(start)
	m.ConnectionRemoved("c")
	wg.Wait()
	if got := seriesOf(t, m, "c"); len(got) != 0 {
		t.Fatalf("observations racing with ConnectionRemoved left series:\n%s", strings.Join(got, "\n"))
	}
}

func TestManifestErrorsSeriesOnlyWhileInvalid(t *testing.T) {
	m, _ := newTestMetrics(time.Unix(1000, 0))
	steps := []struct {
		file string
		n    int
		want map[string]float64
	}{
		{"a.yaml", 2, map[string]float64{"a.yaml": 2}},
		{"b.yaml", 1, map[string]float64{"a.yaml": 2, "b.yaml": 1}},
		{"a.yaml", 0, map[string]float64{"b.yaml": 1}},
		{"b.yaml", 3, map[string]float64{"b.yaml": 3}},
		{"c.yaml", 0, map[string]float64{"b.yaml": 3}}, // never invalid: no series
		{"b.yaml", 0, map[string]float64{}},
	}
	for i, s := range steps {
		m.SetManifestErrors(s.file, s.n)
		if got := testutil.CollectAndCount(m.manifestErrors); got != len(s.want) {
			t.Errorf("step %d: %d tether_manifest_errors series, want %d", i, got, len(s.want))
		}
		for f, v := range s.want {
			if got := testutil.ToFloat64(m.manifestErrors.WithLabelValues(f)); got != v {
				t.Errorf("step %d: tether_manifest_errors{file=%q} = %v, want %v", i, f, got, v)
			}
		}
	}
}

func TestResultLabelsStayBounded(t *testing.T) {
	m, _ := newTestMetrics(time.Unix(1000, 0))
	m.ConnectionAdded("c")
	for _, tc := range []struct {
		observe func()
		family  string
		labels  []string
	}{
		{func() { m.ObserveReconcile("success", time.Millisecond) }, "tether_reconcile_total", []string{"success"}},
		{func() { m.ObserveReconcile("requeue", time.Millisecond) }, "tether_reconcile_total", []string{"requeue"}},
		{func() { m.ObserveReconcile("error", time.Millisecond) }, "tether_reconcile_total", []string{"error"}},
		{func() { m.ObserveReconcile("something else", time.Millisecond) }, "tether_reconcile_total", []string{"error"}},
		{func() { m.ObserveCall("c", "ok", time.Millisecond) }, "tether_gateway_tool_calls_total", []string{"c", "ok"}},
		{func() { m.ObserveCall("c", "canceled", time.Millisecond) }, "tether_gateway_tool_calls_total", []string{"c", "canceled"}},
		{func() { m.ObserveCall("c", "weird", time.Millisecond) }, "tether_gateway_tool_calls_total", []string{"c", "error"}},
		{func() { m.ObserveAttempt("c", true) }, "tether_connection_attempts_total", []string{"c", "success"}},
		{func() { m.ObserveAttempt("c", false) }, "tether_connection_attempts_total", []string{"c", "failure"}},
	} {
		before := value(t, m, tc.family, tc.labels...)
		tc.observe()
		if got := value(t, m, tc.family, tc.labels...); got != before+1 {
			t.Errorf("%v: counter went %v -> %v, want +1", tc.labels, before, got)
		}
	}
	if n := testutil.CollectAndCount(m.reconciles); n != 3 {
		t.Errorf("tether_reconcile_total has %d series, want 3 (success, error, requeue)", n)
	}
	if n := len(familyOf(t, m, "tether_gateway_tool_calls_total")); n != 4 {
		t.Errorf("tether_gateway_tool_calls_total has %d series, want 4", n)
	}
	// A call for a connection the metrics never heard of adds nothing.
	m.ObserveCall("stranger", CallOK, time.Millisecond)
	if got := seriesOf(t, m, "stranger"); len(got) != 0 {
		t.Errorf("unknown connection got series: %v", got)
	}
}

func TestQueueProviderFeedsControllerRuntimeNames(t *testing.T) {
	m, _ := newTestMetrics(time.Unix(1000, 0))
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "connections", MetricsProvider: m.QueueProvider()})
	defer q.ShutDown()

	q.Add("a")
	q.Add("b")
	item, _ := q.Get()
	q.Done(item)
	q.AddRateLimited("c")

	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(m.queue.depth.WithLabelValues("connections")) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("workqueue_depth never reached 2 (b and the rate-limited c)")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, c := range []struct {
		name   string
		metric prometheus.Collector
		want   float64
	}{
		{"adds (a, b, c after its delay)", m.queue.adds.WithLabelValues("connections"), 3},
		{"retries (c)", m.queue.retries.WithLabelValues("connections"), 1},
	} {
		if got := testutil.ToFloat64(c.metric); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	want := []string{
		"workqueue_adds_total", "workqueue_depth", "workqueue_longest_running_processor_seconds",
		"workqueue_queue_duration_seconds", "workqueue_retries_total",
		"workqueue_unfinished_work_seconds", "workqueue_work_duration_seconds",
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "workqueue_") {
			got[mf.GetName()] = true
			for _, s := range mf.GetMetric() {
				if v := labelValue(s, "name"); v != "connections" {
					t.Errorf("%s has name=%q, want connections", mf.GetName(), v)
				}
			}
		}
	}
	for _, n := range want {
		if !got[n] {
			t.Errorf("%s is missing from the registry", n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("workqueue families: got %d, want %d", len(got), len(want))
	}
}

func TestRegistryLintsClean(t *testing.T) {
	m, clk := newTestMetrics(time.Unix(1000, 0))
	playScenario(m, clk)
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
