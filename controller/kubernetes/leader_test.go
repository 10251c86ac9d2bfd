package kubernetes

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

// leaseServer holds one Lease as the API server does: every write bumps its
// resourceVersion, and an update that carries another resourceVersion than
// the stored one is refused with 409 Conflict. (The fake dynamic client's
// object tracker does not check resourceVersions.)
type leaseServer struct {
	mu     sync.Mutex
	rv     int
	lease  *unstructured.Unstructured
	writes int
	// beforeUpdate and beforeGet, when set, run once before the next update
	// or get is handled: another replica's write that lands between a read
	// and a write, or while a read is under way.
	beforeUpdate, beforeGet func()
}

// client is one replica's connection to the server; it counts the
// replica's requests, and while *down holds an error every request fails
// with it (a partition).
func (s *leaseServer) client(down *atomic.Pointer[error], requests *atomic.Int64) dynamic.Interface {
	c := fake.NewSimpleDynamicClient(runtime.NewScheme())
	c.PrependReactor("*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		requests.Add(1)
		if err := down.Load(); err != nil {
			return true, nil, *err
		}
		obj, err := s.handle(a)
		return true, obj, err
	})
	return c
}

func (s *leaseServer) handle(a clienttesting.Action) (runtime.Object, error) {
	s.mu.Lock()
	var hook func()
	switch a.GetVerb() {
	case "update":
		hook, s.beforeUpdate = s.beforeUpdate, nil
	case "get":
		hook, s.beforeGet = s.beforeGet, nil
	}
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gr := leasesResource.GroupResource()
	// By verb: an update action is a create action too, to a type switch.
	switch a.GetVerb() {
	case "get":
		name := a.(clienttesting.GetAction).GetName()
		if s.lease == nil || s.lease.GetName() != name {
			return nil, apierrors.NewNotFound(gr, name)
		}
		return s.lease.DeepCopy(), nil
	case "create":
		obj := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		if s.lease != nil {
			return nil, apierrors.NewAlreadyExists(gr, obj.GetName())
		}
		s.store(obj)
		return obj.DeepCopy(), nil
	case "update":
		obj := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		if s.lease == nil {
			return nil, apierrors.NewNotFound(gr, obj.GetName())
		}
		if obj.GetResourceVersion() != s.lease.GetResourceVersion() {
			return nil, apierrors.NewConflict(gr, obj.GetName(), errors.New("the object has been modified"))
		}
		s.store(obj)
		return obj.DeepCopy(), nil
	}
	return nil, errors.New("leaseServer: unexpected " + a.GetVerb())
}

func (s *leaseServer) store(obj *unstructured.Unstructured) {
	s.rv++
	s.writes++
	obj.SetResourceVersion(strconv.Itoa(s.rv))
	s.lease = obj
}

// record returns the stored Lease's record.
func (s *leaseServer) record(t *testing.T) leaseRecord {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease == nil {
		t.Fatal("no Lease")
	}
	r, err := readLeaseRecord(s.lease)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// count is how many writes the server took.
func (s *leaseServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// put stores a Lease held by holder, as another process wrote it.
func (s *leaseServer) put(rec leaseRecord) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"namespace": "ns", "name": "tether"},
	}}
	if err := setLeaseRecord(obj, rec); err != nil {
		panic(err)
	}
	s.mu.Lock()
	s.store(obj)
	s.mu.Unlock()
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// replica is one elector on a leaseServer, with its log.
type replica struct {
	*Elector
	down     atomic.Pointer[error]
	requests atomic.Int64
	logs     syncBuffer
}

func newReplica(s *leaseServer, id string, clock func() time.Time, lease, renew, retry time.Duration) *replica {
	r := &replica{}
	r.Elector = NewElector(ElectorOptions{
		Client: s.client(&r.down, &r.requests), Namespace: "ns", Name: "tether", Identity: id,
		LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
		Logger: slog.New(slog.NewTextHandler(&r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if clock != nil {
		r.now = clock
	}
	return r
}

// stepReplica is a replica whose tries the test makes one by one, on clock.
func stepReplica(s *leaseServer, id string, clock *fakeClock) *replica {
	return newReplica(s, id, clock.Now, 3*time.Second, 2*time.Second, 500*time.Millisecond)
}

func (r *replica) try(t *testing.T) bool {
	t.Helper()
	return r.tryAcquireOrRenew(t.Context())
}

func TestElectorTakesAFreeLease(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}

	t.Run("none yet: created", func(t *testing.T) {
		s := &leaseServer{}
		a := stepReplica(s, "a", clock)
		if !a.try(t) {
			t.Fatalf("a did not take a Lease that does not exist; log:\n%s", a.logs.String())
		}
		got := s.record(t)
		if got.holder != "a" || got.durationSeconds != 3 || got.transitions != 0 || got.renewTime != microTime(clock.Now()) {
			t.Errorf("created Lease = %+v", got)
		}
		// The leader renews: same holder, acquireTime and transitions,
		// a new renewTime.
		clock.Step(500 * time.Millisecond)
		if !a.try(t) {
			t.Fatal("a could not renew")
		}
		renewed := s.record(t)
		if renewed.holder != "a" || renewed.acquireTime != got.acquireTime || renewed.transitions != 0 || renewed.renewTime != microTime(clock.Now()) {
			t.Errorf("renewed Lease = %+v (was %+v)", renewed, got)
		}
	})

	t.Run("released: taken at the first try", func(t *testing.T) {
		s := &leaseServer{}
		s.put(leaseRecord{durationSeconds: 1, renewTime: microTime(clock.Now()), transitions: 4})
		b := stepReplica(s, "b", clock)
		if !b.try(t) {
			t.Fatalf("b did not take a released Lease; log:\n%s", b.logs.String())
		}
		if got := s.record(t); got.holder != "b" || got.transitions != 5 || got.durationSeconds != 3 {
			t.Errorf("taken Lease = %+v, want holder b, 5 transitions, 3s", got)
		}
	})
}

// TestElectorWaitsForExpiry: a held Lease is taken only once this candidate
// has seen it unchanged for leaseDurationSeconds by its own clock, whatever
// its timestamps say.
func TestElectorWaitsForExpiry(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

	t.Run("the holder stops renewing", func(t *testing.T) {
		clock := &fakeClock{t: t0}
		s := &leaseServer{}
		a, b := stepReplica(s, "a", clock), stepReplica(s, "b", clock)
		if !a.try(t) {
			t.Fatal("a did not take the Lease")
		}
		if b.try(t) {
			t.Fatal("b took a Lease renewed just now")
		}
		clock.Step(2900 * time.Millisecond)
		if b.try(t) {
			t.Fatal("b took the Lease 2.9s after it last saw it change (lease 3s)")
		}
		clock.Step(200 * time.Millisecond)
		if !b.try(t) {
			t.Fatalf("b did not take the Lease 3.1s after it last saw it change; log:\n%s", b.logs.String())
		}
		if got := s.record(t); got.holder != "b" || got.transitions != 1 {
			t.Errorf("Lease = %+v, want holder b after 1 transition", got)
		}
		// The old holder learns it at its next try.
		if a.try(t) {
			t.Error("a renewed a Lease b holds")
		}
	})

	t.Run("a renewal restarts the count", func(t *testing.T) {
		clock := &fakeClock{t: t0}
		s := &leaseServer{}
		a, b := stepReplica(s, "a", clock), stepReplica(s, "b", clock)
		a.try(t)
		b.try(t) // b sees the record at t0
		clock.Step(2 * time.Second)
		if !a.try(t) { // a renews at t0+2s
			t.Fatal("a could not renew")
		}
		clock.Step(1500 * time.Millisecond)
		if b.try(t) { // t0+3.5s: b sees the renewal now
			t.Fatal("b took the Lease although it had just changed")
		}
		clock.Step(2900 * time.Millisecond)
		if b.try(t) {
			t.Fatal("b took the Lease 2.9s after it saw it change")
		}
		clock.Step(200 * time.Millisecond)
		if !b.try(t) {
			t.Fatal("b did not take the Lease 3.1s after it saw it change")
		}
	})

	t.Run("a renewal that lands during the read", func(t *testing.T) {
		// b's read takes 1.5s, and a's renewal lands meanwhile: b counts
		// from when its read returned, not from when it began, or it would
		// take the Lease while a still leads (a's renew deadline runs 2s
		// from its renewal, b's lease 3s from its observation).
		clock := &fakeClock{t: t0}
		s := &leaseServer{}
		a, b := stepReplica(s, "a", clock), stepReplica(s, "b", clock)
		a.try(t)
		a.mu.Lock()
		a.leading = true // as Run sets it
		a.mu.Unlock()
		b.try(t) // b sees the record at t0
		clock.Step(2900 * time.Millisecond)
		s.beforeGet = func() {
			clock.Step(1500 * time.Millisecond)
			if !a.try(t) { // a renews at t0+4.4s
				t.Error("a could not renew")
			}
		}
		if b.try(t) {
			t.Fatal("b took a Lease renewed during its read")
		}
		clock.Step(1600 * time.Millisecond) // t0+6s
		if !a.Leading() {
			t.Fatal("a does not lead 1.6s after its renewal (renew deadline 2s)")
		}
		if b.try(t) {
			t.Fatal("b took the Lease while a leads: it counted from when its read began")
		}
		clock.Step(1500 * time.Millisecond) // t0+7.5s: 3.1s after b's read returned
		if a.Leading() {
			t.Error("a leads 3.1s after its last renewal (renew deadline 2s)")
		}
		if !b.try(t) {
			t.Fatal("b did not take the Lease 3.1s after it saw it change")
		}
	})

	t.Run("old timestamps do not make a Lease expired", func(t *testing.T) {
		// Written by a replica whose clock is an hour behind, or read by a
		// candidate that just started: only this candidate's own
		// observation counts.
		clock := &fakeClock{t: t0}
		s := &leaseServer{}
		old := microTime(t0.Add(-time.Hour))
		s.put(leaseRecord{holder: "x", durationSeconds: 3, acquireTime: old, renewTime: old, transitions: 2})
		b := stepReplica(s, "b", clock)
		if b.try(t) {
			t.Fatal("b took a Lease it saw for the first time because its renewTime is old")
		}
		clock.Step(3100 * time.Millisecond)
		if !b.try(t) {
			t.Fatal("b did not take the Lease after seeing it unchanged for 3.1s")
		}
		if got := s.record(t); got.transitions != 3 {
			t.Errorf("transitions = %d, want 3", got.transitions)
		}
	})
}

// TestElectorLosesOnConflict: two candidates read the same expired Lease;
// the API server lets the first write win and refuses the second (409), as
// the resourceVersion each read is no longer the Lease's.
func TestElectorLosesOnConflict(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	s := &leaseServer{}
	old := microTime(clock.Now())
	s.put(leaseRecord{holder: "gone", durationSeconds: 3, acquireTime: old, renewTime: old})
	b, c := stepReplica(s, "b", clock), stepReplica(s, "c", clock)
	b.try(t)
	c.try(t)
	clock.Step(3100 * time.Millisecond)
	cWon := false
	s.beforeUpdate = func() { cWon = c.try(t) } // c writes between b's read and b's write
	if b.try(t) {
		t.Fatal("b took the Lease although c wrote it after b read it")
	}
	if !cWon {
		t.Fatalf("c did not take the expired Lease; log:\n%s", c.logs.String())
	}
	if !strings.Contains(b.logs.String(), "another replica wrote it first") {
		t.Errorf("b's log does not say it lost on a conflict:\n%s", b.logs.String())
	}
	if got := s.record(t); got.holder != "c" || got.transitions != 1 {
		t.Errorf("Lease = %+v, want holder c after 1 transition", got)
	}
	// b now sees c's fresh record: it does not take it at its next try.
	if b.try(t) {
		t.Error("b took the Lease c just took")
	}
}

// run runs the replica's election until the test ends or stop is called.
func (r *replica) run(t *testing.T) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func (r *replica) renewedAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.renewed
}

// TestElectorStepsDown: a leader that cannot reach the API server stops
// leading within the renew deadline of its last renewal, before another
// replica can take the Lease over (lease duration after it last saw it
// change); the two never lead at once. Real time, short timings.
func TestElectorStepsDown(t *testing.T) {
	// Short, but a renewal may stall for over a second on a loaded machine.
	const lease, renew, retry = 4 * time.Second, 2 * time.Second, 400 * time.Millisecond
	s := &leaseServer{}
	a := newReplica(s, "a", nil, lease, renew, retry)
	b := newReplica(s, "b", nil, lease, renew, retry)
	var started atomic.Int32
	a.opts.OnStartedLeading = func() { started.Add(1) }
	stopA := a.run(t)
	eventually(t, 5*time.Second, "a leads", a.Leading)
	// When b begins: its own callback, so a poll cannot miss it.
	var bSince atomic.Pointer[time.Time]
	b.opts.OnStartedLeading = func() {
		now := time.Now()
		bSince.CompareAndSwap(nil, &now)
	}
	stopB := b.run(t)

	// Watch that they never lead together.
	var both atomic.Bool
	watching, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-watching:
				return
			case <-time.After(time.Millisecond):
			}
			aLeads, bLeads := a.Leading(), b.Leading()
			if aLeads && bLeads {
				both.Store(true)
			}
		}
	}()
	writes := s.count()
	eventually(t, 10*time.Second, "a renews 3 times", func() bool { return s.count() >= writes+3 })
	if b.Leading() || !a.Leading() {
		t.Fatalf("before the partition: a leads %v, b leads %v", a.Leading(), b.Leading())
	}

	refused := error(errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"))
	a.down.Store(&refused)
	eventually(t, 10*time.Second, "b leads", func() bool { return bSince.Load() != nil && b.Leading() })
	close(watching)
	<-watched
	if both.Load() {
		t.Error("a and b led at the same time")
	}
	if a.Leading() {
		t.Error("a still leads")
	}
	if gap := bSince.Load().Sub(a.renewedAt()); gap < lease {
		t.Errorf("b took over %s after a's last renewal, before the lease duration %s", gap, lease)
	}
	eventually(t, 5*time.Second, "a says it stepped down", func() bool {
		return strings.Contains(a.logs.String(), "stepping down")
	})

	// a reaches the API server again: it sees b's Lease and stays a
	// candidate; stopping it leaves b's Lease alone.
	a.down.Store(nil)
	tries := a.requests.Load()
	eventually(t, 10*time.Second, "a tries 3 times", func() bool { return a.requests.Load() >= tries+3 })
	if a.Leading() || !b.Leading() {
		t.Errorf("after the partition: a leads %v, b leads %v", a.Leading(), b.Leading())
	}
	stopA()
	if got := s.record(t); got.holder != "b" {
		t.Errorf("after a stopped the Lease holder is %q, want b", got.holder)
	}
	if n := started.Load(); n != 1 {
		t.Errorf("a started leading %d times, want 1", n)
	}
	stopB()
}

// TestElectorReleasesOnStop: a leader that stops clears the holder and sets
// leaseDurationSeconds to 1; the next replica takes the Lease at its first
// try, not after a lease duration.
func TestElectorReleasesOnStop(t *testing.T) {
	const lease, renew, retry = 3 * time.Second, 2 * time.Second, 500 * time.Millisecond
	s := &leaseServer{}
	a := newReplica(s, "a", nil, lease, renew, retry)
	stopA := a.run(t)
	eventually(t, 5*time.Second, "a leads", a.Leading)
	stopA()
	if a.Leading() {
		t.Error("a leads after Run returned")
	}
	got := s.record(t)
	if got.holder != "" || got.durationSeconds != 1 || got.transitions != 0 {
		t.Errorf("released Lease = %+v, want no holder, 1s, 0 transitions", got)
	}
	if !strings.Contains(a.logs.String(), "released the Lease") {
		t.Errorf("a's log does not say it released the Lease:\n%s", a.logs.String())
	}

	b := newReplica(s, "b", nil, lease, renew, retry)
	began := time.Now()
	b.run(t)
	eventually(t, 5*time.Second, "b leads", b.Leading)
	if took := time.Since(began); took >= lease {
		t.Errorf("b took %s to take a released Lease (lease duration %s)", took, lease)
	}
	if got := s.record(t); got.holder != "b" || got.transitions != 1 {
		t.Errorf("Lease = %+v, want holder b after 1 transition", got)
	}
}

// TestElectorLeadingEndsWithContext: Leading turns false when ctx of Run
// ends, before the Lease is released.
func TestElectorLeadingEndsWithContext(t *testing.T) {
	s := &leaseServer{}
	a := newReplica(s, "a", nil, 3*time.Second, 2*time.Second, 500*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	eventually(t, 5*time.Second, "a leads", a.Leading)
	// Hold the release back: Leading must already be false meanwhile.
	release := make(chan struct{})
	s.mu.Lock()
	s.beforeUpdate = func() { <-release }
	s.mu.Unlock()
	cancel()
	eventually(t, 5*time.Second, "a no longer leads", func() bool { return !a.Leading() })
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestElectorValidate(t *testing.T) {
	for _, tc := range []struct {
		lease, renew, retry time.Duration
		want                string
	}{
		{3 * time.Second, 2 * time.Second, 500 * time.Millisecond, ""},
		{15 * time.Second, 10 * time.Second, 2 * time.Second, ""},
		{500 * time.Millisecond, 200 * time.Millisecond, 100 * time.Millisecond, "whole seconds"},
		{2500 * time.Millisecond, 2 * time.Second, 500 * time.Millisecond, "(2s as the Lease stores it) must be greater than the renew deadline 2s"},
		{3 * time.Second, 3 * time.Second, 500 * time.Millisecond, "must be greater than the renew deadline"},
		{3 * time.Second, 2 * time.Second, 2 * time.Second, "must be greater than 1.2 × the retry period"},
	} {
		e := NewElector(ElectorOptions{Client: fake.NewSimpleDynamicClient(runtime.NewScheme()), Namespace: "ns", Name: "tether",
			LeaseDuration: tc.lease, RenewDeadline: tc.renew, RetryPeriod: tc.retry})
		err := e.validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s/%s/%s: %v", tc.lease, tc.renew, tc.retry, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s/%s/%s: error %v, want one saying %q", tc.lease, tc.renew, tc.retry, err, tc.want)
		}
	}
}

// TestLeaseRecordRoundTrip: the record reads back as written, and fields of
// the Lease the election does not own are kept.
func TestLeaseRecordRoundTrip(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"namespace": "ns", "name": "tether"},
		"spec":     map[string]any{"strategy": "OldestEmulationVersion", "leaseDurationSeconds": "3"},
	}}
	if _, err := readLeaseRecord(obj); err == nil || !strings.Contains(err.Error(), "Lease ns/tether: spec.leaseDurationSeconds") {
		t.Errorf("a string leaseDurationSeconds: error %v", err)
	}
	rec := leaseRecord{holder: "a", durationSeconds: 3, acquireTime: microTime(time.Unix(1, 5000)), renewTime: microTime(time.Unix(2, 0)), transitions: 7}
	if err := setLeaseRecord(obj, rec); err != nil {
		t.Fatal(err)
	}
	got, err := readLeaseRecord(obj)
	rec.strategy = "OldestEmulationVersion"
	if err != nil || got != rec {
		t.Errorf("read back %+v, %v; want %+v", got, err, rec)
	}
	if got.acquireTime != "1970-01-01T00:00:01.000005Z" {
		t.Errorf("acquireTime = %q, want metav1.MicroTime's form", got.acquireTime)
	}
}
