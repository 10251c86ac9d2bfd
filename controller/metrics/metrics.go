package metrics

import (
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tether-mcp/tether/spec"
)

// Label values of tether_connection_attempts_total{result}.
const (
	AttemptSuccess = "success"
	AttemptFailure = "failure"
)

// Label values of tether_reconcile_total{result}.
const (
	ReconcileSuccess = "success"
	ReconcileError   = "error"
	ReconcileRequeue = "requeue"
)

// Label values of tether_gateway_tool_calls_total{result}; the gateway's
// ResultOK… constants carry the same strings.
const (
	CallOK       = "ok"
	CallError    = "error"
	CallTimeout  = "timeout"
	CallCanceled = "canceled"
)

var (
	attemptResults   = []string{AttemptSuccess, AttemptFailure}
	reconcileResults = []string{ReconcileSuccess, ReconcileError, ReconcileRequeue}
	callResults      = []string{CallOK, CallError, CallTimeout, CallCanceled}
)

// Bucket layouts. A health check is one ping or tools/list round trip: a few
// milliseconds over stdio or loopback, up to the probe timeout (5s by
// default). A tool call spans from an in-memory answer (~100µs) to the
// default callTimeout (60s). A reconcile never blocks on the network, only on
// a status write.
var (
	healthCheckBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	toolCallBuckets    = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	reconcileBuckets   = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
)

// Metrics is tether's instrumentation. It implements controller.Metrics for
// the reconciler and ObserveCall/SetCollisions for the gateway. All methods
// are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry
	now func() time.Time

	up             *prometheus.GaugeVec
	state          *prometheus.GaugeVec
	tools          *prometheus.GaugeVec
	attempts       *prometheus.CounterVec
	lastTransition *prometheus.GaugeVec
	healthCheck    *prometheus.HistogramVec
	manifestErrors *prometheus.GaugeVec
	reconciles     *prometheus.CounterVec
	reconcileTime  prometheus.Histogram
	toolCalls      *prometheus.CounterVec
	toolCallTime   *prometheus.HistogramVec
	collisions     *prometheus.GaugeVec
	queue          *queueMetrics

	// mu orders per-connection updates against ConnectionRemoved: an
	// observation holds it shared, add and remove hold it exclusively, so a
	// health probe or tool call that finishes after its connection was
	// removed cannot bring the deleted series back.
	mu    sync.RWMutex
	phase map[string]spec.Phase // known connections and their current phase
}

// New returns Metrics on a private registry that also holds the Go and
// process collectors and tether_build_info{version, goversion}.
func New(version string) *Metrics {
	connection := []string{"connection"}
	m := &Metrics{
		reg:   prometheus.NewRegistry(),
		now:   time.Now,
		phase: map[string]spec.Phase{},
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tether_connection_up",
			Help: "1 while the connection has a live MCP session (phase Connected or Degraded), else 0.",
		}, connection),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tether_connection_state",
			Help: "The connection's phase, one-hot: 1 for the current state, 0 for every other.",
		}, []string{"connection", "state"}),
		tools: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tether_connection_tools",
			Help: "Tools the connection exposes through the gateway, after its allow/deny filters.",
		}, connection),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_connection_attempts_total",
			Help: "Connection attempts, by result (success or failure).",
		}, []string{"connection", "result"}),
		lastTransition: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tether_connection_last_transition_timestamp_seconds",
			Help: "Unix time at which the connection entered its current phase.",
		}, connection),
		healthCheck: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tether_connection_health_check_duration_seconds",
			Help:    "Duration of the health checks of a connected session, failed ones included.",
			Buckets: healthCheckBuckets,
		}, connection),
		manifestErrors: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tether_manifest_errors",
			Help: "Errors in a manifest file; the series exists only while the file is invalid.",
		}, []string{"file"}),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_reconcile_total",
			Help: "Reconciles, by result (success, error or requeue).",
		}, []string{"result"}),
		reconcileTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tether_reconcile_duration_seconds",
			Help:    "Duration of one reconcile of one connection.",
			Buckets: reconcileBuckets,
		}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_gateway_tool_calls_total",
			Help: "tools/call requests the gateway routed to a connection, by result (ok, error, timeout or canceled).",
		}, []string{"connection", "result"}),
		toolCallTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tether_gateway_tool_call_duration_seconds",
			Help:    "Duration of the tools/call requests the gateway routed to a connection.",
			Buckets: toolCallBuckets,
		}, connection),
		collisions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tether_gateway_tool_collisions",
			Help: "Exposed tool names this connection lost to another connection and does not serve.",
		}, connection),
		queue: newQueueMetrics(),
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tether_build_info",
		Help: "Always 1; the labels say which tether build is running.",
	}, []string{"version", "goversion"})
	buildInfo.WithLabelValues(version, runtime.Version()).Set(1)

	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo,
		m.up, m.state, m.tools, m.attempts, m.lastTransition, m.healthCheck,
		m.manifestErrors, m.reconciles, m.reconcileTime,
		m.toolCalls, m.toolCallTime, m.collisions,
	)
	m.queue.register(m.reg)
	// Every result exists from the start, so rate() and absent-based alerts
	// see a zero before the first event rather than no series at all.
	for _, r := range reconcileResults {
		m.reconciles.WithLabelValues(r)
	}
	return m
}

// Registry returns the private registry, for serving and for tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// stateLabel is a phase as the state label spells it.
func stateLabel(p spec.Phase) string { return strings.ToLower(string(p)) }

func knownPhase(p spec.Phase) bool {
	for _, q := range spec.Phases {
		if p == q {
			return true
		}
	}
	return false
}

// ConnectionAdded creates every series of the connection, zero-initialised,
// with its state Pending since now. It is idempotent: a connection already
// known keeps its values.
func (m *Metrics) ConnectionAdded(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.phase[name]; ok {
		return
	}
	m.up.WithLabelValues(name).Set(0)
	m.tools.WithLabelValues(name).Set(0)
	for _, r := range attemptResults {
		m.attempts.WithLabelValues(name, r)
	}
	m.healthCheck.WithLabelValues(name)
	for _, r := range callResults {
		m.toolCalls.WithLabelValues(name, r)
	}
	m.toolCallTime.WithLabelValues(name)
	m.collisions.WithLabelValues(name).Set(0)
	m.setPhaseLocked(name, spec.PhasePending)
}

// ConnectionRemoved deletes every series with connection=name. Later calls
// for name are ignored until ConnectionAdded(name) again.
func (m *Metrics) ConnectionRemoved(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.phase, name)
	l := prometheus.Labels{"connection": name}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{
		m.up, m.state, m.tools, m.attempts, m.lastTransition, m.healthCheck,
		m.toolCalls, m.toolCallTime, m.collisions,
	} {
		v.DeletePartialMatch(l)
	}
}

// SetPhase sets tether_connection_state one-hot and tether_connection_up,
// and moves tether_connection_last_transition_timestamp_seconds when the
// phase differs from the last one set. A phase not in spec.Phases is
// ignored: the state label only takes the values DESIGN §4 lists.
func (m *Metrics) SetPhase(name string, phase spec.Phase) {
	if !knownPhase(phase) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.phase[name]
	if !ok || cur == phase {
		return
	}
	m.setPhaseLocked(name, phase)
}

func (m *Metrics) setPhaseLocked(name string, phase spec.Phase) {
	m.phase[name] = phase
	for _, p := range spec.Phases {
		v := 0.0
		if p == phase {
			v = 1
		}
		m.state.WithLabelValues(name, stateLabel(p)).Set(v)
	}
	up := 0.0
	if phase == spec.PhaseConnected || phase == spec.PhaseDegraded {
		up = 1
	}
	m.up.WithLabelValues(name).Set(up)
	m.lastTransition.WithLabelValues(name).Set(float64(m.now().UnixNano()) / 1e9)
}

// known runs f under the shared lock when name is a known connection.
func (m *Metrics) known(name string, f func()) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if _, ok := m.phase[name]; ok {
		f()
	}
}

// SetTools sets tether_connection_tools.
func (m *Metrics) SetTools(name string, exposed int) {
	m.known(name, func() { m.tools.WithLabelValues(name).Set(float64(exposed)) })
}

// ObserveAttempt counts one finished connection attempt.
func (m *Metrics) ObserveAttempt(name string, success bool) {
	r := AttemptFailure
	if success {
		r = AttemptSuccess
	}
	m.known(name, func() { m.attempts.WithLabelValues(name, r).Inc() })
}

// ObserveHealthCheck records the duration of one health check.
func (m *Metrics) ObserveHealthCheck(name string, d time.Duration) {
	m.known(name, func() { m.healthCheck.WithLabelValues(name).Observe(d.Seconds()) })
}

// SetManifestErrors sets tether_manifest_errors{file}; n <= 0 deletes the
// series, so only invalid files have one.
func (m *Metrics) SetManifestErrors(file string, n int) {
	if n <= 0 {
		m.manifestErrors.DeleteLabelValues(file)
		return
	}
	m.manifestErrors.WithLabelValues(file).Set(float64(n))
}

// ObserveReconcile counts one reconcile and records its duration. A result
// other than success, error or requeue is counted as error, so the label
// stays bounded whatever a caller passes.
func (m *Metrics) ObserveReconcile(result string, d time.Duration) {
	switch result {
	case ReconcileSuccess, ReconcileError, ReconcileRequeue:
	default:
		result = ReconcileError
	}
	m.reconciles.WithLabelValues(result).Inc()
	m.reconcileTime.Observe(d.Seconds())
}

// ObserveCall counts one tools/call the gateway routed to connection and
// records its duration. A result other than ok, error, timeout or canceled
// is counted as error.
func (m *Metrics) ObserveCall(connection, result string, d time.Duration) {
	switch result {
	case CallOK, CallError, CallTimeout, CallCanceled:
	default:
		result = CallError
	}
	m.known(connection, func() {
		m.toolCalls.WithLabelValues(connection, result).Inc()
		m.toolCallTime.WithLabelValues(connection).Observe(d.Seconds())
	})
}

// SetCollisions sets tether_gateway_tool_collisions: how many exposed names
// connection lost to another connection.
func (m *Metrics) SetCollisions(connection string, n int) {
	m.known(connection, func() { m.collisions.WithLabelValues(connection).Set(float64(n)) })
}
