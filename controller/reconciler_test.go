package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/yaml"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/gateway"
	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/controller/statusfile"
	"github.com/tether-mcp/tether/controller/supervisor"
	"github.com/tether-mcp/tether/spec"
)

// fakeSession is a Session whose life the test controls. The gateway's
// methods it does not define are not called here (the exposer is a fake).
type fakeSession struct {
	gateway.Backend
	tools    []*mcp.Tool
	probeErr func() error
	done     chan struct{}
	once     sync.Once
	err      error
	closed   chan struct{}
	proc     *spec.ProcessStatus
	onEnd    func() // the supervisor.ConnectRequest's, as a real session calls it

	actMu sync.Mutex
	busy  bool
	last  time.Time
}

func newFakeSession(tools ...string) *fakeSession {
	s := &fakeSession{done: make(chan struct{}), closed: make(chan struct{})}
	for _, t := range tools {
		s.tools = append(s.tools, &mcp.Tool{Name: t})
	}
	return s
}

func (s *fakeSession) Server() spec.ServerInfo {
	return spec.ServerInfo{Name: "fake", Version: "1.0.0", ProtocolVersion: "2025-11-25"}
}
func (s *fakeSession) Tools() []*mcp.Tool { return s.tools }
func (s *fakeSession) Probe(ctx context.Context) error {
	if s.probeErr != nil {
		return s.probeErr()
	}
	return nil
}
func (s *fakeSession) CallTool(context.Context, *mcp.CallToolParams, func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{}, nil
}
func (s *fakeSession) Done() <-chan struct{}      { return s.done }
func (s *fakeSession) Prompts() []*mcp.Prompt     { return nil }
func (s *fakeSession) Resources() []*mcp.Resource { return nil }
func (s *fakeSession) ResourceTemplates() []*mcp.ResourceTemplate {
	return nil
}
func (s *fakeSession) Activity() (bool, time.Time) {
	s.actMu.Lock()
	defer s.actMu.Unlock()
	return s.busy, s.last
}
func (s *fakeSession) Err() error                   { return s.err }
func (s *fakeSession) Process() *spec.ProcessStatus { return s.proc }
func (s *fakeSession) Close() error {
	s.once.Do(func() { close(s.done); close(s.closed); s.ended() })
	return nil
}

// die ends the session as a crashed server would.
func (s *fakeSession) die(err error) {
	s.err = err
	s.once.Do(func() { close(s.done); s.ended() })
}

func (s *fakeSession) ended() {
	if s.onEnd != nil {
		s.onEnd()
	}
}

// fakeConnector answers connects from a script: each call takes the next
// outcome (a session, or an error).
type fakeConnector struct {
	mu       sync.Mutex
	outcomes []any
	calls    []supervisor.ConnectRequest
}

func (f *fakeConnector) push(o ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outcomes = append(f.outcomes, o...)
}

func (f *fakeConnector) Connect(ctx context.Context, req supervisor.ConnectRequest) (supervisor.Session, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req)
	if len(f.outcomes) == 0 {
		f.mu.Unlock()
		return nil, errors.New("no scripted outcome")
	}
	o := f.outcomes[0]
	f.outcomes = f.outcomes[1:]
	f.mu.Unlock()
	switch o := o.(type) {
	case *fakeSession:
		o.onEnd = req.OnEnd
		return o, nil
	case error:
		return nil, o
	}
	panic("bad outcome")
}

func (f *fakeConnector) ncalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// fakeExposer records what the reconciler asks of the gateway.
type fakeExposer struct {
	mu  sync.Mutex
	set map[string]Exposed
	off map[string]string
	// held is the prefix and filter of the last SetUnavailable.
	held map[string]Exposed
}

func newFakeExposer() *fakeExposer {
	return &fakeExposer{set: map[string]Exposed{}, off: map[string]string{}}
}
func (x *fakeExposer) Set(e Exposed) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.set[e.Name] = e
	delete(x.off, e.Name)
}
func (x *fakeExposer) SetUnavailable(name, prefix string, filter *spec.ToolFilter, reason string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.set, name)
	x.off[name] = reason
	if x.held == nil {
		x.held = map[string]Exposed{}
	}
	x.held[name] = Exposed{Name: name, Prefix: prefix, Filter: filter}
}
func (x *fakeExposer) Remove(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.set, name)
	delete(x.off, name)
}
func (x *fakeExposer) Exposure(name string) gateway.Exposure {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.set[name]
	if !ok {
		return gateway.Exposure{}
	}
	n := 0
	for _, t := range e.Backend.Tools() {
		if e.Filter.Allows(t.Name) {
			n++
		}
	}
	return gateway.Exposure{Tools: n}
}
func (x *fakeExposer) get(name string) (Exposed, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.set[name]
	return e, ok
}

// harness drives a Reconciler by hand: the test writes manifests, calls
// Reconcile and waits for the reconciler's goroutines to ask for more.
type harness struct {
	t        *testing.T
	dir      string
	desired  *desired.Store
	status   *statusfile.Writer
	conn     *fakeConnector
	exposer  *fakeExposer
	r        *Reconciler
	enqueued chan string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, nil)
}

// newHarnessWith is newHarness with the reconciler's options adjusted.
func newHarnessWith(t *testing.T, adjust func(*ReconcilerOptions)) *harness {
	t.Helper()
	h := &harness{
		t:        t,
		dir:      t.TempDir(),
		desired:  desired.NewStore(),
		conn:     &fakeConnector{},
		exposer:  newFakeExposer(),
		enqueued: make(chan string, 100),
	}
	h.status = statusfile.NewWriter(h.dir, "", h.desired.At)
	opts := ReconcilerOptions{
		Desired:   h.desired,
		Status:    h.status,
		Connector: h.conn,
		Exposer:   h.exposer,
		Enqueue:   func(n string) { h.enqueued <- n },
		Jitter:    func() float64 { return 0 },
		// Most tests look at every phase; TestConnectingGrace covers it.
		ConnectingGrace: -1,
	}
	if adjust != nil {
		adjust(&opts)
	}
	h.r = NewReconciler(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.r.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return h
}

// apply writes one manifest file and loads the tree into the desired state.
func (h *harness) apply(file, content string) {
	h.t.Helper()
	p := filepath.Join(h.dir, file)
	if content == "" {
		os.Remove(p)
	} else if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
	src := manifest.NewSource(manifest.SourceOptions{Root: h.dir}, h.desired)
	if err := src.Sync(); err != nil {
		h.t.Fatal(err)
	}
}

// onTree completes o for the manifest tree at dir, wired as tether run
// wires it: the tree's watcher as the Source, status files as the sink.
func onTree(dir string, o Options) Options {
	store := desired.NewStore()
	o.Desired = store
	o.Source = manifest.NewSource(manifest.SourceOptions{Root: dir, Logger: o.Logger}, store)
	o.Status = statusfile.NewWriter(dir, "", store.At)
	return o
}

// retryNow lets name's next reconcile start an attempt without waiting for
// the backoff delay.
func (h *harness) retryNow(name string) {
	h.t.Helper()
	h.r.mu.Lock()
	rec := h.r.conns[name]
	h.r.mu.Unlock()
	rec.sup.RetryNow()
}

func (h *harness) reconcile(name string) Result {
	h.t.Helper()
	res, err := h.r.Reconcile(context.Background(), name)
	if err != nil {
		h.t.Fatalf("Reconcile(%s): %v", name, err)
	}
	return res
}

// waitEnqueued waits until a reconciler goroutine asks for name.
func (h *harness) waitEnqueued(name string) {
	h.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case n := <-h.enqueued:
			if n == name {
				return
			}
		case <-deadline:
			h.t.Fatalf("%s was not enqueued", name)
		}
	}
}

func (h *harness) statusOf(file, name string) spec.ConnectionStatus {
	h.t.Helper()
	data, err := os.ReadFile(statusfile.Path(h.dir, "", filepath.Join(h.dir, file)))
	if err != nil {
		h.t.Fatalf("reading status: %v", err)
	}
	for _, raw := range statusfile.SplitDocuments(data) {
		var doc spec.StatusDocument
		if err := yaml.UnmarshalStrict(raw, &doc); err != nil {
			h.t.Fatalf("status is not a strict StatusDocument: %v\n%s", err, raw)
		}
		if doc.Metadata.Name == name {
			return doc.Status
		}
	}
	h.t.Fatalf("no status for %s in\n%s", name, data)
	return spec.ConnectionStatus{}
}

func manifestYAML(name, extra string) string {
	return `apiVersion: tether.dev/v1alpha1
kind: McpConnection
metadata:
  name: ` + name + `
spec:
  stdio:
    command: server
` + extra
}

func conditionOf(st spec.ConnectionStatus, typ string) spec.Condition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return spec.Condition{}
}

func TestReconcileConnects(t *testing.T) {
	h := newHarness(t)
	h.conn.push(newFakeSession("a", "b", "c"))
	h.apply("one.yaml", manifestYAML("one", "  tools: {deny: [c]}\n"))

	h.reconcile("one")
	if st := h.statusOf("one.yaml", "one"); st.Phase != spec.PhaseConnecting {
		t.Fatalf("phase after first pass = %s, want Connecting", st.Phase)
	}
	h.waitEnqueued("one")
	h.reconcile("one")
	st := h.statusOf("one.yaml", "one")
	if st.Phase != spec.PhaseConnected {
		t.Fatalf("phase = %s, want Connected (lastError %q)", st.Phase, st.LastError)
	}
	if st.Tools == nil || st.Tools.Count != 3 || st.Tools.Exposed != 2 {
		t.Errorf("tools = %+v, want count 3 exposed 2", st.Tools)
	}
	if c := conditionOf(st, spec.ConditionReady); c.Status != spec.ConditionTrue || c.Reason != spec.ReasonConnected {
		t.Errorf("Ready = %+v", c)
	}
	if c := conditionOf(st, spec.ConditionReconciling); c.Status != spec.ConditionFalse {
		t.Errorf("Reconciling = %+v", c)
	}
	if st.Server == nil || st.Server.Name != "fake" || st.ConnectedSince == nil {
		t.Errorf("server/connectedSince missing: %+v", st)
	}
	if e, ok := h.exposer.get("one"); !ok || e.Prefix != "one" {
		t.Errorf("gateway not given the connection: %+v %v", e, ok)
	}
}

func TestReconcileBackoff(t *testing.T) {
	h := newHarness(t)
	const failures = 8
	for range failures {
		h.conn.push(errors.New("connection refused"))
	}
	h.conn.push(newFakeSession("a"))
	h.apply("one.yaml", manifestYAML("one", ""))

	want := []time.Duration{100, 200, 400, 800, 1600, 3000, 3000, 3000}
	h.reconcile("one")
	for i := range failures {
		h.waitEnqueued("one")
		res := h.reconcile("one")
		if res.RequeueAfter != want[i]*time.Millisecond {
			t.Errorf("failure %d: RequeueAfter = %v, want %v", i+1, res.RequeueAfter, want[i]*time.Millisecond)
		}
		st := h.statusOf("one.yaml", "one")
		if st.Phase != spec.PhaseReconnecting || st.Attempt != i+1 || st.NextRetryTime == nil ||
			!strings.Contains(st.LastError, "connection refused") {
			t.Fatalf("failure %d: status = %+v", i+1, st)
		}
		// Pretend the delay passed.
		h.retryNow("one")
		h.reconcile("one")
	}
	h.waitEnqueued("one")
	h.reconcile("one")
	st := h.statusOf("one.yaml", "one")
	if st.Phase != spec.PhaseConnected || st.Attempt != 0 || st.LastError != "" || st.NextRetryTime != nil {
		t.Fatalf("after success: %+v", st)
	}
}

func TestReconcileBackoffOverride(t *testing.T) {
	h := newHarness(t)
	h.conn.push(errors.New("refused"), errors.New("refused"), errors.New("refused"))
	h.apply("one.yaml", manifestYAML("one", "  backoff: {initial: 1s, max: 1500ms}\n"))
	h.reconcile("one")
	for i, want := range []time.Duration{time.Second, 1500 * time.Millisecond} {
		h.waitEnqueued("one")
		if res := h.reconcile("one"); res.RequeueAfter != want {
			t.Errorf("failure %d: RequeueAfter = %v, want %v", i+1, res.RequeueAfter, want)
		}
		h.retryNow("one")
		h.reconcile("one")
	}
}

// connectOnce reconciles name through one connect attempt to Connected.
func connectOnce(h *harness, file, name string) {
	h.t.Helper()
	h.reconcile(name)
	awaitConnected(h, file, name)
}

// awaitConnected reconciles name each time the reconciler asks for it until
// the connect attempt under way shows Connected, for up to 5 s. The
// reconciler asks when the attempt ends, and may have asked before for a
// reason that came earlier (the previous session's end, or its probe still
// in flight when it went down): one request is not proof that the attempt
// ended.
func awaitConnected(h *harness, file, name string) {
	h.t.Helper()
	awaitPhase(h, file, name, spec.PhaseConnected)
}

// awaitPhase is awaitConnected for any phase the attempt under way ends
// in; it returns the result of the reconcile that showed it.
func awaitPhase(h *harness, file, name string, phase spec.Phase) Result {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.waitEnqueued(name)
		res := h.reconcile(name)
		st := h.statusOf(file, name)
		if st.Phase == phase {
			return res
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("phase = %s, want %s (%s)", st.Phase, phase, st.LastError)
		}
	}
}

func TestReconcileSessionLost(t *testing.T) {
	h := newHarness(t)
	s1, s2 := newFakeSession("a"), newFakeSession("a")
	s1.proc = &spec.ProcessStatus{PID: 42}
	h.conn.push(s1, s2)
	h.apply("one.yaml", manifestYAML("one", ""))
	connectOnce(h, "one.yaml", "one")

	code := 3
	s1.proc = &spec.ProcessStatus{PID: 42, LastExitCode: &code, StderrTail: []string{"boom"}}
	s1.die(errors.New("exit status 3"))
	h.waitEnqueued("one") // the monitor saw the session end
	res := h.reconcile("one")
	st := h.statusOf("one.yaml", "one")
	if st.Phase != spec.PhaseReconnecting || !strings.Contains(st.LastError, "exit status 3") {
		t.Fatalf("after crash: %+v", st)
	}
	if st.Process == nil || st.Process.LastExitCode == nil || *st.Process.LastExitCode != 3 ||
		len(st.Process.StderrTail) != 1 {
		t.Errorf("process = %+v", st.Process)
	}
	if res.RequeueAfter != 100*time.Millisecond {
		t.Errorf("first retry after a drop = %v, want 100ms", res.RequeueAfter)
	}
	if _, ok := h.exposer.get("one"); ok {
		t.Error("a lost connection is still exposed")
	}
	h.retryNow("one")
	connectOnce(h, "one.yaml", "one")
	if st := h.statusOf("one.yaml", "one"); st.Process == nil || st.Process.Restarts != 1 {
		t.Errorf("restarts = %+v, want 1", st.Process)
	}
}

// TestReconcileEditWhileAwayReachesGateway: the gateway keeps a lost
// connection's names (docs/contract.md §5) as far as the prefix and filter
// it was last told expose them; an edit of either while the connection is
// away is told at once, so that the names it no longer exposes go to
// whoever else lists them, not when (if ever) it comes back.
func TestReconcileEditWhileAwayReachesGateway(t *testing.T) {
	h := newHarness(t)
	s1 := newFakeSession("a", "b")
	h.conn.push(s1) // then every attempt fails: "no scripted outcome"
	h.apply("one.yaml", manifestYAML("one", "  tools: {deny: [b]}\n"))
	connectOnce(h, "one.yaml", "one")
	s1.die(errors.New("exit status 3"))
	h.waitEnqueued("one")
	h.reconcile("one")
	held := func() Exposed {
		h.exposer.mu.Lock()
		defer h.exposer.mu.Unlock()
		return h.exposer.held["one"]
	}
	if e := held(); e.Prefix != "one" || !reflect.DeepEqual(e.Filter, &spec.ToolFilter{Deny: []string{"b"}}) {
		t.Fatalf("after the drop the gateway holds %+v, want prefix one, deny [b]", e)
	}
	h.apply("one.yaml", manifestYAML("one", "  toolPrefix: other\n  tools: {deny: [b]}\n"))
	h.reconcile("one")
	if e := held(); e.Prefix != "other" {
		t.Errorf("after a prefix edit while away the gateway holds prefix %q, want other", e.Prefix)
	}
	h.apply("one.yaml", manifestYAML("one", "  toolPrefix: other\n  tools: {allow: [a]}\n"))
	h.reconcile("one")
	if e := held(); !reflect.DeepEqual(e.Filter, &spec.ToolFilter{Allow: []string{"a"}}) {
		t.Errorf("after a filter edit while away the gateway holds filter %+v, want allow [a]", e.Filter)
	}
	h.exposer.mu.Lock()
	reason := h.exposer.off["one"]
	h.exposer.mu.Unlock()
	if !strings.Contains(reason, "exit status 3") {
		t.Errorf("the edit replaced why the connection is away: %q", reason)
	}
}

func TestReconcileInPlaceAndReconnectingEdits(t *testing.T) {
	tests := []struct {
		name      string
		edit      string
		reconnect bool
	}{
		{"toolPrefix", "  toolPrefix: other\n", false},
		{"tools filter", "  tools: {allow: [a]}\n", false},
		{"health", "  healthCheck: {interval: 1m}\n", false},
		{"callTimeout", "  callTimeout: 5s\n", false},
		{"args", "    args: [--verbose]\n", true},
		{"env", "    env: [{name: A, value: b}]\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			s1 := newFakeSession("a", "b")
			h.conn.push(s1, newFakeSession("a", "b"))
			h.apply("one.yaml", manifestYAML("one", ""))
			connectOnce(h, "one.yaml", "one")

			h.apply("one.yaml", manifestYAML("one", tt.edit))
			h.reconcile("one")
			// A dropped session is closed in the background: a reconnecting
			// edit gets time to close it, an in-place one 100ms to show that
			// it closes nothing.
			wait := 100 * time.Millisecond
			if tt.reconnect {
				wait = 5 * time.Second
			}
			select {
			case <-s1.closed:
				if !tt.reconnect {
					t.Fatal("an in-place edit closed the session")
				}
			case <-time.After(wait):
				if tt.reconnect {
					t.Fatal("the session was not closed for a reconnecting edit")
				}
			}
			if tt.reconnect {
				awaitConnected(h, "one.yaml", "one")
			}
			st := h.statusOf("one.yaml", "one")
			if st.Phase != spec.PhaseConnected {
				t.Fatalf("phase = %s", st.Phase)
			}
			wantCalls := 1
			if tt.reconnect {
				wantCalls = 2
			}
			if n := h.conn.ncalls(); n != wantCalls {
				t.Errorf("connects = %d, want %d", n, wantCalls)
			}
			if tt.name == "toolPrefix" {
				if e, _ := h.exposer.get("one"); e.Prefix != "other" {
					t.Errorf("prefix = %q, want other", e.Prefix)
				}
			}
		})
	}
}

func TestReconcileSuspend(t *testing.T) {
	h := newHarness(t)
	s1 := newFakeSession("a")
	h.conn.push(s1)
	h.apply("one.yaml", manifestYAML("one", ""))
	connectOnce(h, "one.yaml", "one")

	h.apply("one.yaml", manifestYAML("one", "  suspend: true\n"))
	if res := h.reconcile("one"); res.RequeueAfter != 0 {
		t.Errorf("suspended connection requeued after %v", res.RequeueAfter)
	}
	select {
	case <-s1.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("suspend did not close the session")
	}
	st := h.statusOf("one.yaml", "one")
	if st.Phase != spec.PhaseSuspended || conditionOf(st, spec.ConditionReady).Status != spec.ConditionFalse {
		t.Fatalf("status = %+v", st)
	}
	if n := h.conn.ncalls(); n != 1 {
		t.Errorf("connects = %d, want 1", n)
	}
}

func TestReconcileInvalidManifest(t *testing.T) {
	h := newHarness(t)
	s1 := newFakeSession("a")
	h.conn.push(s1)
	h.apply("one.yaml", manifestYAML("one", ""))
	connectOnce(h, "one.yaml", "one")
	before := h.statusOf("one.yaml", "one")

	// A typo keeps the working connection and reports the error.
	h.apply("one.yaml", manifestYAML("one", "  healthCheck: {interval: 3x}\n"))
	h.reconcile("one")
	st := h.statusOf("one.yaml", "one")
	if st.Phase != spec.PhaseConnected {
		t.Fatalf("a typo moved the connection to %s", st.Phase)
	}
	if !strings.Contains(st.ManifestError, "spec.healthCheck.interval") {
		t.Errorf("manifestError = %q", st.ManifestError)
	}
	if st.ObservedSpecHash != before.ObservedSpecHash {
		t.Errorf("observedSpecHash moved to the invalid spec")
	}
	if c := conditionOf(st, spec.ConditionStalled); c.Status != spec.ConditionTrue {
		t.Errorf("Stalled = %+v", c)
	}
	select {
	case <-s1.closed:
		t.Fatal("a typo closed the session")
	default:
	}

	// A manifest that was never valid is Invalid.
	h.apply("two.yaml", manifestYAML("two", "  bogus: 1\n"))
	h.reconcile("two")
	st = h.statusOf("two.yaml", "two")
	if st.Phase != spec.PhaseInvalid || !strings.Contains(st.ManifestError, "bogus") {
		t.Fatalf("never-valid status = %+v", st)
	}
	if n := h.conn.ncalls(); n != 1 {
		t.Errorf("connects = %d, want 1 (nothing for an invalid manifest)", n)
	}
}

func TestReconcileRemoval(t *testing.T) {
	h := newHarness(t)
	s1 := newFakeSession("a")
	h.conn.push(s1)
	h.apply("one.yaml", manifestYAML("one", ""))
	connectOnce(h, "one.yaml", "one")

	h.apply("one.yaml", "")
	h.reconcile("one")
	select {
	case <-s1.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("removal did not close the session")
	}
	if _, err := os.Stat(filepath.Join(h.dir, "one.status.yaml")); !os.IsNotExist(err) {
		t.Errorf("status file still there: %v", err)
	}
}

func TestReconcileHealthThreshold(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	failing := false
	s1 := newFakeSession("a")
	s1.probeErr = func() error {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return errors.New("ping: connection refused")
		}
		return nil
	}
	h.conn.push(s1, newFakeSession("a"))
	h.apply("one.yaml", manifestYAML("one", "  healthCheck: {interval: 10ms, timeout: 1s, failureThreshold: 2}\n"))
	connectOnce(h, "one.yaml", "one")

	mu.Lock()
	failing = true
	mu.Unlock()
	h.waitEnqueued("one") // first failure: Degraded
	h.reconcile("one")
	if st := h.statusOf("one.yaml", "one"); st.Phase != spec.PhaseDegraded && st.Phase != spec.PhaseReconnecting {
		t.Fatalf("after one failed probe: %s", st.Phase)
	}
	h.waitEnqueued("one") // second failure: down
	h.reconcile("one")
	st := h.statusOf("one.yaml", "one")
	if st.Phase != spec.PhaseReconnecting || !strings.Contains(st.LastError, "health checks in a row failed") {
		t.Fatalf("after threshold: %+v", st)
	}
	select {
	case <-s1.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("unhealthy session not closed")
	}
}

func TestStatusWrittenOnlyOnChange(t *testing.T) {
	h := newHarness(t)
	h.conn.push(newFakeSession("a"))
	h.apply("one.yaml", manifestYAML("one", ""))
	connectOnce(h, "one.yaml", "one")
	p := filepath.Join(h.dir, "one.status.yaml")
	fi1, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	// Make any rewrite visible: move the file's mtime into the past.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		h.reconcile("one")
	}
	fi2, _ := os.Stat(p)
	if !fi2.ModTime().Equal(old) {
		t.Errorf("status rewritten although nothing changed (mtime %v, size %d→%d)", fi2.ModTime(), fi1.Size(), fi2.Size())
	}
}

// TestConnectingGrace: a new connection's status is not written while it is
// Connecting within the grace; one that connects in time goes straight to
// Connected, and one that does not shows Connecting once the grace is over.
func TestConnectingGrace(t *testing.T) {
	h := newHarness(t)
	h.r.opts.ConnectingGrace = time.Hour
	h.conn.push(newFakeSession("a"))
	h.apply("fast.yaml", manifestYAML("fast", ""))
	if res := h.reconcile("fast"); res.RequeueAfter <= 0 || res.RequeueAfter > time.Hour {
		t.Errorf("RequeueAfter = %v, want the rest of the grace", res.RequeueAfter)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "fast.status.yaml")); !os.IsNotExist(err) {
		t.Fatalf("status written during the grace: %v", err)
	}
	h.waitEnqueued("fast")
	h.reconcile("fast")
	if st := h.statusOf("fast.yaml", "fast"); st.Phase != spec.PhaseConnected {
		t.Fatalf("phase = %s, want Connected as the first status", st.Phase)
	}

	// A slow one: the grace ends before the attempt does. The clock is
	// the test's, so the grace passes without waiting.
	now := time.Now()
	h.r.mu.Lock()
	h.r.opts.Now = func() time.Time { return now }
	h.r.opts.ConnectingGrace = 50 * time.Millisecond
	block := make(chan struct{})
	h.r.opts.Connector = &blockingConnector{release: block}
	h.r.mu.Unlock()
	h.apply("slow.yaml", manifestYAML("slow", ""))
	res := h.reconcile("slow")
	if res.RequeueAfter != 50*time.Millisecond {
		t.Fatalf("RequeueAfter = %v during the grace, want 50ms", res.RequeueAfter)
	}
	h.r.mu.Lock()
	now = now.Add(res.RequeueAfter)
	h.r.mu.Unlock()
	h.reconcile("slow")
	if st := h.statusOf("slow.yaml", "slow"); st.Phase != spec.PhaseConnecting {
		t.Fatalf("phase after the grace = %s, want Connecting", st.Phase)
	}
	close(block)
}

// TestConnectingGraceBusy: when the grace ends while more names wait in
// the queue than the workers take (many connections starting at once), a
// Connecting status is put off once more, by DefaultConnectingGraceBusy,
// and then written, busy or not.
func TestConnectingGraceBusy(t *testing.T) {
	h := newHarness(t)
	now := time.Now()
	block := make(chan struct{})
	defer close(block)
	h.r.mu.Lock()
	h.r.opts.Now = func() time.Time { return now }
	h.r.opts.ConnectingGrace = 50 * time.Millisecond
	h.r.opts.Busy = func() bool { return true }
	h.r.opts.Connector = &blockingConnector{release: block}
	h.r.mu.Unlock()
	advance := func(d time.Duration) {
		h.r.mu.Lock()
		now = now.Add(d)
		h.r.mu.Unlock()
	}
	h.apply("slow.yaml", manifestYAML("slow", ""))
	res := h.reconcile("slow")
	if res.RequeueAfter != 50*time.Millisecond {
		t.Fatalf("RequeueAfter = %v during the grace, want 50ms", res.RequeueAfter)
	}
	advance(res.RequeueAfter)
	res = h.reconcile("slow")
	if res.RequeueAfter != DefaultConnectingGraceBusy {
		t.Fatalf("RequeueAfter = %v at the grace's end while busy, want %v", res.RequeueAfter, DefaultConnectingGraceBusy)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "slow.status.yaml")); !os.IsNotExist(err) {
		t.Fatalf("status written at the grace's end while busy: %v", err)
	}
	advance(res.RequeueAfter)
	h.reconcile("slow")
	if st := h.statusOf("slow.yaml", "slow"); st.Phase != spec.PhaseConnecting {
		t.Fatalf("phase after the busy grace = %s, want Connecting (written, busy or not)", st.Phase)
	}
}

// TestConnectingGraceBusyFailure: a connection whose first attempt fails
// while its Connecting status is put off (busy) shows the failure at once,
// not at the end of the put-off.
func TestConnectingGraceBusyFailure(t *testing.T) {
	h := newHarness(t)
	now := time.Now()
	block := make(chan struct{})
	h.r.mu.Lock()
	h.r.opts.Now = func() time.Time { return now }
	h.r.opts.ConnectingGrace = 50 * time.Millisecond
	h.r.opts.Busy = func() bool { return true }
	h.r.opts.Connector = &blockingConnector{release: block}
	h.r.mu.Unlock()
	h.apply("slow.yaml", manifestYAML("slow", ""))
	h.reconcile("slow")
	h.r.mu.Lock()
	now = now.Add(50 * time.Millisecond)
	h.r.mu.Unlock()
	if res := h.reconcile("slow"); res.RequeueAfter != DefaultConnectingGraceBusy {
		t.Fatalf("RequeueAfter = %v at the grace's end while busy, want %v", res.RequeueAfter, DefaultConnectingGraceBusy)
	}
	close(block) // the attempt fails
	h.waitEnqueued("slow")
	h.reconcile("slow")
	if st := h.statusOf("slow.yaml", "slow"); st.Phase != spec.PhaseReconnecting || !strings.Contains(st.LastError, "released") {
		t.Fatalf("status after a failure during the put-off = %s %q, want Reconnecting with the error", st.Phase, st.LastError)
	}
}

// blockingConnector fails every attempt once release is closed.
type blockingConnector struct{ release chan struct{} }

func (b *blockingConnector) Connect(ctx context.Context, _ supervisor.ConnectRequest) (supervisor.Session, error) {
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return nil, errors.New("released")
}

// TestBackoffStartsAfreshForANewSpec: a connection that failed often, then
// connected, starts a changed spec's backoff at the beginning.
func TestBackoffStartsAfreshForANewSpec(t *testing.T) {
	h := newHarness(t)
	for range 6 {
		h.conn.push(errors.New("refused"))
	}
	h.conn.push(newFakeSession("a"), errors.New("the new spec fails"))
	h.apply("one.yaml", manifestYAML("one", ""))
	h.reconcile("one")
	for range 6 {
		h.waitEnqueued("one")
		h.reconcile("one")
		h.retryNow("one")
		h.reconcile("one")
	}
	h.waitEnqueued("one")
	h.reconcile("one")
	if st := h.statusOf("one.yaml", "one"); st.Phase != spec.PhaseConnected {
		t.Fatalf("phase = %s, want Connected", st.Phase)
	}
	h.apply("one.yaml", manifestYAML("one", "    args: [--new]\n"))
	h.reconcile("one") // drops the session, starts the new spec's attempt
	// The dropped session's end asks for a reconcile too, maybe before the
	// attempt has failed.
	if res := awaitPhase(h, "one.yaml", "one", spec.PhaseReconnecting); res.RequeueAfter != 100*time.Millisecond {
		t.Errorf("first retry of the new spec after %v, want 100ms", res.RequeueAfter)
	}
}

// failingSource fails at once, as a file watcher that cannot start does.
type failingSource struct{}

func (failingSource) Run(context.Context, func([]string), func()) error {
	return errors.New("too many open files")
}

// TestRunEndsWhenTheSourceFails: Run returns the source's error instead of
// waiting for a signal that a daemon with no desired state would wait for
// forever.
func TestRunEndsWhenTheSourceFails(t *testing.T) {
	store := desired.NewStore()
	ctrl := New(Options{Desired: store, Source: failingSource{}, Status: statusfile.NewWriter(t.TempDir(), "", store.At), Connector: &fakeConnector{}})
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "desired-state source: too many open files") {
			t.Errorf("Run = %v, want the source's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its source failed")
	}
}

// flakySink fails the first Delete, as a full disk would.
type flakySink struct {
	StatusSink
	mu      sync.Mutex
	deletes int
}

func (f *flakySink) Delete(name string) error {
	f.mu.Lock()
	f.deletes++
	n := f.deletes
	f.mu.Unlock()
	if n == 1 {
		return errors.New("no space left on device")
	}
	return f.StatusSink.Delete(name)
}

// TestRemovalRetriesAFailedStatusDelete: the retry of a removal whose status
// delete failed deletes it, although the connection is gone already.
func TestRemovalRetriesAFailedStatusDelete(t *testing.T) {
	var sink *flakySink
	h := newHarnessWith(t, func(o *ReconcilerOptions) {
		sink = &flakySink{StatusSink: o.Status}
		o.Status = sink
	})
	h.conn.push(newFakeSession("a"))
	h.apply("one.yaml", manifestYAML("one", ""))
	h.reconcile("one")
	h.waitEnqueued("one")
	h.reconcile("one")
	status := filepath.Join(h.dir, "one.status.yaml")
	if _, err := os.Stat(status); err != nil {
		t.Fatal(err)
	}
	h.apply("one.yaml", "")
	if _, err := h.r.Reconcile(context.Background(), "one"); err == nil {
		t.Fatal("the failed delete was not reported")
	}
	if _, err := h.r.Reconcile(context.Background(), "one"); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if _, err := os.Stat(status); !os.IsNotExist(err) {
		t.Errorf("status file after the retry: %v", err)
	}
}

// TestControllerBusy: the controller tells its reconciler it is busy when
// more names wait in its queue than it has workers.
func TestControllerBusy(t *testing.T) {
	store := desired.NewStore()
	ctrl := New(Options{Desired: store, Source: failingSource{}, Status: statusfile.NewWriter(t.TempDir(), "", store.At), Connector: &fakeConnector{}, Workers: 2})
	defer ctrl.queue.ShutDown()
	busy := ctrl.reconciler.opts.Busy
	if busy == nil {
		t.Fatal("the reconciler has no Busy")
	}
	for i, name := range []string{"a", "b", "c"} {
		if got, want := busy(), i > 2; got != want {
			t.Errorf("%d names queued, 2 workers: Busy = %v, want %v", i, got, want)
		}
		ctrl.queue.Add(name)
	}
	if !busy() {
		t.Error("3 names queued, 2 workers: not busy")
	}
}

// policyRefusal is an error that says tether refuses the connection's
// confinement policy, as controller/sandbox's RefusedError does.
type policyRefusal struct{}

func (policyRefusal) Error() string {
	return "spec.stdio.sandbox.write[0]: /m holds the manifest's directory (/m)"
}
func (policyRefusal) PolicyRefused() bool { return true }

// TestRefusedPolicyIsWhyCallsFail: a connection whose restart tether
// refuses (phase Refused, no retry until the spec changes) has the
// gateway answer its tools' calls with that refusal, not with how its
// last session ended, which no retry will change; a new spec that is not
// refused takes the refusal back.
func TestRefusedPolicyIsWhyCallsFail(t *testing.T) {
	h := newHarness(t)
	s1 := newFakeSession("a")
	h.conn.push(s1, policyRefusal{})
	h.apply("one.yaml", manifestYAML("one", ""))
	connectOnce(h, "one.yaml", "one")
	s1.die(errors.New("exit status 3"))
	h.waitEnqueued("one")
	h.reconcile("one")
	reason := func() string {
		h.exposer.mu.Lock()
		defer h.exposer.mu.Unlock()
		return h.exposer.off["one"]
	}
	if r := reason(); !strings.Contains(r, "exit status 3") {
		t.Fatalf("after the drop the gateway says %q, want the exit", r)
	}
	h.retryNow("one")
	h.reconcile("one")
	awaitPhase(h, "one.yaml", "one", spec.PhaseRefused)
	if r, want := reason(), "tether refuses its confinement policy until the manifest changes: "+(policyRefusal{}).Error(); r != want {
		t.Errorf("a refused connection's calls are told %q, want %q", r, want)
	}
	h.apply("one.yaml", manifestYAML("one", "    args: [--other]\n"))
	h.reconcile("one")
	awaitPhase(h, "one.yaml", "one", spec.PhaseReconnecting)
	if r := reason(); strings.Contains(r, "refuses") {
		t.Errorf("after a new spec, the calls are still told %q", r)
	}
}
