package metrics

import (
	"runtime"
	"strings"
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
// a status write. The per-connection layouts are arrays so that a
// connection's record holds its bucket counts inline.
var (
	healthCheckBuckets = [...]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	toolCallBuckets    = [...]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	reconcileBuckets   = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
)

// Metrics is tether's instrumentation. It implements controller.Metrics for
// the reconciler and ObserveCall/SetCollisions for the gateway. All methods
// are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry
	now func() time.Time

	// conns holds every series labelled connection (connections.go says
	// why they are not vecs).
	conns          *connectionSet
	manifestErrors *prometheus.GaugeVec
	reconciles     *prometheus.CounterVec
	reconcileTime  prometheus.Histogram
	queue          *queueMetrics
}

// New returns Metrics on a private registry that also holds the Go and
// process collectors and tether_build_info{version, goversion}.
func New(version string) *Metrics {
	m := &Metrics{
		reg:   prometheus.NewRegistry(),
		now:   time.Now,
		conns: newConnectionSet(),
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
		m.conns,
		m.manifestErrors, m.reconciles, m.reconcileTime,
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

// ConnectionAdded creates every series of the connection, zero-initialised,
// with its state Pending since now. It is idempotent: a connection already
// known keeps its values.
func (m *Metrics) ConnectionAdded(name string) { m.conns.add(name, m.now) }

// ConnectionRemoved deletes every series with connection=name. Later calls
// for name are ignored until ConnectionAdded(name) again.
func (m *Metrics) ConnectionRemoved(name string) { m.conns.remove(name) }

// SetPhase sets tether_connection_state one-hot and tether_connection_up,
// and moves tether_connection_last_transition_timestamp_seconds when the
// phase differs from the last one set. A phase not in spec.Phases is
// ignored: the state label only takes the values docs/contract.md §4 lists.
func (m *Metrics) SetPhase(name string, phase spec.Phase) {
	i, ok := phaseIndex(phase)
	if !ok {
		return
	}
	c := m.conns.get(name)
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase != i {
		c.phase = i
		c.transition = m.now().UnixNano()
	}
}

// SetTools sets tether_connection_tools.
func (m *Metrics) SetTools(name string, exposed int) {
	if c := m.conns.get(name); c != nil {
		c.mu.Lock()
		c.tools = int32(exposed)
		c.mu.Unlock()
	}
}

// ObserveAttempt counts one finished connection attempt.
func (m *Metrics) ObserveAttempt(name string, success bool) {
	r := attemptFailure
	if success {
		r = attemptSuccess
	}
	if c := m.conns.get(name); c != nil {
		c.mu.Lock()
		c.attempts[r]++
		c.mu.Unlock()
	}
}

// ObserveHealthCheck records the duration of one health check.
func (m *Metrics) ObserveHealthCheck(name string, d time.Duration) {
	c := m.conns.get(name)
	if c == nil {
		return
	}
	v := d.Seconds()
	b := bucket(healthCheckBuckets[:], v)
	c.mu.Lock()
	c.health[b]++
	c.healthSum += v
	c.mu.Unlock()
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
	r := callError
	switch result {
	case CallOK:
		r = callOK
	case CallTimeout:
		r = callTimeout
	case CallCanceled:
		r = callCanceled
	}
	c := m.conns.get(connection)
	if c == nil {
		return
	}
	v := d.Seconds()
	b := bucket(toolCallBuckets[:], v)
	c.mu.Lock()
	c.calls[r]++
	c.callTime[b]++
	c.callTimeSum += v
	c.mu.Unlock()
}

// SetCollisions sets tether_gateway_tool_collisions: how many exposed names
// connection lost to another connection.
func (m *Metrics) SetCollisions(connection string, n int) {
	if c := m.conns.get(connection); c != nil {
		c.mu.Lock()
		c.collisions = int32(n)
		c.mu.Unlock()
	}
}
