package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Default timings of the leader election, client-go's own defaults: a
// replica that dies unannounced is replaced within LeaseDuration (+ one
// RetryPeriod); one that stops gracefully releases the Lease at once.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// leasesResource is the coordination.k8s.io/v1 Lease resource.
var leasesResource = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// jitterFactor spreads the candidates' tries over [1, 2.2) RetryPeriods, as
// client-go's leaderelection does.
const jitterFactor = 1.2

// ElectorOptions configures an Elector.
type ElectorOptions struct {
	// Client reads and writes the Lease (coordination.k8s.io/v1).
	Client dynamic.Interface
	// Namespace and Name of the Lease.
	Namespace, Name string
	// Identity names this replica in the Lease (default: Identity()).
	Identity string
	// LeaseDuration is how long the other replicas wait, from when they
	// last saw the Lease change, before one takes it over (whole seconds:
	// the Lease stores seconds). RenewDeadline is how long after its last
	// renewal the leader stops writing status if it cannot renew; it must
	// be shorter than LeaseDuration, so that the leader steps down before
	// another can take over. RetryPeriod is how often the leader renews and
	// the others try.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnStartedLeading runs when this replica becomes the leader, once
	// Leading reports true: the status writer forgets what it wrote and the
	// controller reconciles everything, so the new leader writes every
	// status that is not what it sees. It must not block.
	OnStartedLeading func()
	Logger           *slog.Logger
}

// Elector runs leader election on a coordination.k8s.io/v1 Lease, through
// the dynamic client: every replica serves the gateway, the leader alone
// writes status. It stands again after losing the Lease (an API server away
// longer than the renew deadline), as a replica that keeps serving must.
//
// The algorithm is client-go's (tools/leaderelection), written here on an
// unstructured Lease through the dynamic client because client-go's needs
// the typed coordination client, whose package links the scheme of every
// API group: some 20 MB of binary and over 10 MB of resident memory, in
// directory mode too, against the README's target of 15 MB idle. A
// candidate takes the Lease when it does not exist, when it has no holder
// (released), or when the candidate has seen the same record for
// leaseDurationSeconds by its own clock: the holder's timestamps are only
// compared for change, so clock skew between replicas does not matter, only
// clock rate. Every write carries the resourceVersion that was read: of two
// candidates, the API server lets one win and answers the other 409
// Conflict. A change of holder increments leaseTransitions.
type Elector struct {
	opts    ElectorOptions
	log     *slog.Logger
	now     func() time.Time // time.Now; tests set another clock
	ctxDone atomic.Bool

	// mu guards what Leading reads; the rest is the Run goroutine's own.
	mu      sync.Mutex
	leading bool
	renewed time.Time // when the last successful write of this leader was sent

	lease      *unstructured.Unstructured // the Lease as last read or written
	observed   leaseRecord                // its record
	observedAt time.Time                  // when this replica first saw that record
	reported   string                     // the holder last logged
	failure    string                     // the failure last logged
}

// leaseRecord is the part of a Lease's spec the election reads and writes.
// The times are kept as the API server returns them: they are compared for
// change, never against this replica's clock.
type leaseRecord struct {
	holder                 string
	durationSeconds        int64
	acquireTime, renewTime string
	transitions            int64
	// strategy and preferredHolder belong to coordinated leader election,
	// which tether does not take part in; they are kept as they are and
	// only compared for change.
	strategy, preferred string
}

// NewElector returns an elector; Run takes part in the election.
func NewElector(opts ElectorOptions) *Elector {
	if opts.Identity == "" {
		opts.Identity = Identity()
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.RenewDeadline <= 0 {
		opts.RenewDeadline = DefaultRenewDeadline
	}
	if opts.RetryPeriod <= 0 {
		opts.RetryPeriod = DefaultRetryPeriod
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.OnStartedLeading == nil {
		opts.OnStartedLeading = func() {}
	}
	return &Elector{opts: opts, now: time.Now,
		log: opts.Logger.With("lease", opts.Namespace+"/"+opts.Name, "identity", opts.Identity)}
}

// Identity is this replica's name in the Lease: the host name (a pod's
// name) and a random suffix, so that a restarted replica is a new holder.
func Identity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "tether"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}

// validate checks the timings as client-go's NewLeaderElector does, and that
// the duration the Lease stores (whole seconds) still outlasts the renew
// deadline.
func (l *Elector) validate() error {
	o := l.opts
	switch {
	case o.Client == nil:
		return errors.New("leader election: no client")
	case o.Namespace == "" || o.Name == "":
		return fmt.Errorf("leader election: the Lease needs a namespace and a name (got %q/%q)", o.Namespace, o.Name)
	case o.LeaseDuration < time.Second:
		return fmt.Errorf("leader election: lease duration %s: the Lease stores whole seconds, at least 1s", o.LeaseDuration)
	case o.LeaseDuration.Truncate(time.Second) <= o.RenewDeadline:
		return fmt.Errorf("leader election: lease duration %s (%s as the Lease stores it) must be greater than the renew deadline %s",
			o.LeaseDuration, o.LeaseDuration.Truncate(time.Second), o.RenewDeadline)
	case o.RenewDeadline <= time.Duration(jitterFactor*float64(o.RetryPeriod)):
		return fmt.Errorf("leader election: renew deadline %s must be greater than %g × the retry period %s",
			o.RenewDeadline, jitterFactor, o.RetryPeriod)
	}
	return nil
}

// Leading reports whether this replica holds the Lease: it won it, its last
// renewal was sent less than the renew deadline ago (so no other replica can
// have taken it over; the check does not wait for the loop that renews),
// and ctx of Run has not ended. It turns false as soon as ctx ends, before
// the Lease is released: the statuses a stopping replica would write
// (Stopped) are not the truth of a cluster where other replicas serve.
func (l *Elector) Leading() bool {
	if l.ctxDone.Load() {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading && l.now().Sub(l.renewed) < l.opts.RenewDeadline
}

// Run takes part in the election until ctx is done, then releases the Lease
// if it holds it.
func (l *Elector) Run(ctx context.Context) error {
	if err := l.validate(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { l.ctxDone.Store(true) })
	defer stop()
	for ctx.Err() == nil {
		// Each term starts from nothing observed, as client-go starts a new
		// LeaderElector: a replica that stepped down and still holds the
		// Lease reads it again and renews it at once.
		l.lease, l.observed, l.observedAt = nil, leaseRecord{}, time.Time{}
		if !l.acquire(ctx) {
			break
		}
		l.mu.Lock()
		l.leading = true
		l.mu.Unlock()
		l.log.Info("leading: this replica writes status")
		l.opts.OnStartedLeading()
		l.renew(ctx)
		l.mu.Lock()
		l.leading = false
		l.mu.Unlock()
		l.log.Info("no longer leading: another replica writes status")
	}
	l.release()
	return nil
}

// acquire tries every RetryPeriod (jittered) until this replica holds the
// Lease (true) or ctx ends (false).
func (l *Elector) acquire(ctx context.Context) bool {
	for {
		attempt, cancel := context.WithTimeout(ctx, l.opts.RenewDeadline)
		ok := l.tryAcquireOrRenew(attempt)
		cancel()
		l.reportHolder()
		if ok {
			return true
		}
		wait := l.opts.RetryPeriod + time.Duration(mathrand.Float64()*jitterFactor*float64(l.opts.RetryPeriod))
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// renew renews the Lease every RetryPeriod until ctx ends or a renewal has
// not succeeded within RenewDeadline of the last one: then this replica has
// stepped down (Leading is already false) and renew returns.
func (l *Elector) renew(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.opts.RetryPeriod):
		}
		l.mu.Lock()
		deadline := l.renewed.Add(l.opts.RenewDeadline)
		l.mu.Unlock()
		// A request still open at the deadline is given up: whatever the
		// API server makes of it, this replica no longer leads.
		attempt, cancel := context.WithDeadline(ctx, deadline)
		ok := l.tryAcquireOrRenew(attempt)
		cancel()
		l.reportHolder()
		if ctx.Err() != nil {
			return
		}
		if !l.now().Before(deadline) {
			// Even a renewal that succeeded past the deadline ends the
			// term: Leading was false meanwhile and statuses may have gone
			// unwritten; a new term writes them all again.
			l.log.Warn("could not renew the Lease within the renew deadline; stepping down", "renewDeadline", l.opts.RenewDeadline)
			return
		}
		if !ok {
			l.log.Debug("renewing the Lease failed; retrying", "until", deadline)
		}
	}
}

// tryAcquireOrRenew is client-go's tryAcquireOrRenew: it renews the Lease
// this replica holds, or takes it when it is free or expired; true when this
// replica holds it afterwards.
func (l *Elector) tryAcquireOrRenew(ctx context.Context) bool {
	now := l.now()
	want := leaseRecord{
		holder:          l.opts.Identity,
		durationSeconds: int64(l.opts.LeaseDuration / time.Second),
		acquireTime:     microTime(now),
		renewTime:       microTime(now),
	}
	// 1. The leader renews the Lease it wrote last, without reading it
	// first; if it changed meanwhile, the API server refuses (Conflict) and
	// the slow path reads it.
	if l.lease != nil && l.observed.holder == l.opts.Identity && l.observedValid(now) {
		want.acquireTime, want.transitions = l.observed.acquireTime, l.observed.transitions
		if l.write(ctx, l.lease, want, now) == nil {
			l.failure = ""
			return true
		}
	}

	// 2. Read the Lease; create it when there is none.
	lease, err := l.opts.Client.Resource(leasesResource).Namespace(l.opts.Namespace).Get(ctx, l.opts.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if err := l.create(ctx, want, now); err != nil {
			l.failed("could not create the Lease", err)
			return false
		}
		l.failure = ""
		return true
	case err != nil:
		l.failed("could not read the Lease", err)
		return false
	}
	got, err := readLeaseRecord(lease)
	if err != nil {
		l.failed("the Lease cannot be read", err)
		return false
	}

	// 3. A record that changed restarts this replica's count of how long
	// it has seen it unchanged, from when the read returned: a renewal
	// that landed while the read was under way is never counted as older
	// than it is.
	if got != l.observed || l.observedAt.IsZero() {
		l.observed, l.observedAt = got, l.now()
	}
	l.lease = lease
	if got.holder != "" && got.holder != l.opts.Identity && l.observedValid(now) {
		return false // held, and not for long enough unchanged
	}

	// 4. Take it over (or renew it, when the record still names this
	// replica), with the resourceVersion just read.
	if got.holder == l.opts.Identity {
		want.acquireTime, want.transitions = got.acquireTime, got.transitions
	} else {
		want.transitions = got.transitions + 1
	}
	if err := l.write(ctx, lease, want, now); err != nil {
		if apierrors.IsConflict(err) {
			l.log.Info("the Lease changed since it was read: another replica wrote it first", "err", err)
		} else {
			l.failed("could not write the Lease", err)
		}
		return false
	}
	l.failure = ""
	return true
}

// failed logs a failed try at INFO, and again at DEBUG while the tries fail
// the same way (an API server away makes every RetryPeriod fail).
func (l *Elector) failed(msg string, err error) {
	if what := msg + ": " + err.Error(); what != l.failure {
		l.failure = what
		l.log.Info(msg, "err", err)
		return
	}
	l.log.Debug(msg, "err", err)
}

// observedValid reports whether the observed record's holder still holds it
// at now: it has not been seen unchanged for its leaseDurationSeconds.
func (l *Elector) observedValid(now time.Time) bool {
	return l.observedAt.Add(time.Duration(l.observed.durationSeconds) * time.Second).After(now)
}

// write updates lease with rec, under lease's resourceVersion, sent at
// sent; on success it observes rec (see written).
func (l *Elector) write(ctx context.Context, lease *unstructured.Unstructured, rec leaseRecord, sent time.Time) error {
	obj := lease.DeepCopy()
	if err := setLeaseRecord(obj, rec); err != nil {
		return err
	}
	got, err := l.opts.Client.Resource(leasesResource).Namespace(l.opts.Namespace).Update(ctx, obj,
		metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return err
	}
	l.written(got, rec, sent)
	return nil
}

// create creates the Lease with rec, sent at sent.
func (l *Elector) create(ctx context.Context, rec leaseRecord, sent time.Time) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "coordination.k8s.io/v1",
		"kind":       "Lease",
		"metadata":   map[string]any{"namespace": l.opts.Namespace, "name": l.opts.Name},
	}}
	if err := setLeaseRecord(obj, rec); err != nil {
		return err
	}
	got, err := l.opts.Client.Resource(leasesResource).Namespace(l.opts.Namespace).Create(ctx, obj,
		metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return err
	}
	l.written(got, rec, sent)
	return nil
}

// written observes a record this replica wrote, as of now (as client-go
// does). When the record names this replica, it was renewed at sent: the
// time the write was sent, no later than any other replica can have seen
// it, so that Leading's deadline ends before any of them can count the
// Lease expired.
func (l *Elector) written(lease *unstructured.Unstructured, rec leaseRecord, sent time.Time) {
	if back, err := readLeaseRecord(lease); err == nil {
		rec = back // as the API server stored it, to compare with the next read
	}
	l.lease, l.observed, l.observedAt = lease, rec, l.now()
	if rec.holder == l.opts.Identity {
		l.mu.Lock()
		l.renewed = sent
		l.mu.Unlock()
	}
}

// reportHolder logs a change of holder that another replica made.
func (l *Elector) reportHolder() {
	if l.observed.holder == l.reported {
		return
	}
	l.reported = l.observed.holder
	if l.reported != "" && l.reported != l.opts.Identity {
		l.log.Info("another replica leads", "leader", l.reported)
	}
}

// release gives the Lease up, when this replica holds it, so that another
// takes over at its next try rather than after a lease duration: the holder
// is cleared and leaseDurationSeconds set to 1, as client-go does. The
// Lease is read first and left alone when another replica holds it by now.
func (l *Elector) release() {
	if l.observed.holder != l.opts.Identity {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.RenewDeadline)
	defer cancel()
	leases := l.opts.Client.Resource(leasesResource).Namespace(l.opts.Namespace)
	for {
		lease, err := leases.Get(ctx, l.opts.Name, metav1.GetOptions{})
		if err != nil {
			l.log.Warn("could not release the Lease: reading it", "err", err)
			return
		}
		got, err := readLeaseRecord(lease)
		if err != nil {
			l.log.Warn("could not release the Lease", "err", err)
			return
		}
		if got.holder != l.opts.Identity {
			return
		}
		now := l.now()
		rec := leaseRecord{durationSeconds: 1, acquireTime: microTime(now), renewTime: microTime(now), transitions: got.transitions}
		obj := lease.DeepCopy()
		if err := setLeaseRecord(obj, rec); err != nil {
			l.log.Warn("could not release the Lease", "err", err)
			return
		}
		_, err = leases.Update(ctx, obj, metav1.UpdateOptions{FieldManager: fieldManager})
		switch {
		case err == nil:
			l.observed = rec
			l.log.Info("released the Lease")
			return
		case apierrors.IsConflict(err):
			continue // a renewal that ctx cut short landed meanwhile: read again
		default:
			l.log.Warn("could not release the Lease", "err", err)
			return
		}
	}
}

// microTime formats t as a Lease's times are (metav1.MicroTime).
func microTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00") }

// readLeaseRecord reads the election's fields of a Lease's spec; a field of
// the wrong type is an error naming it.
func readLeaseRecord(lease *unstructured.Unstructured) (leaseRecord, error) {
	var r leaseRecord
	where := "the Lease " + lease.GetNamespace() + "/" + lease.GetName()
	str := func(field string) (string, error) {
		v, _, err := unstructured.NestedString(lease.Object, "spec", field)
		if err != nil {
			return "", fmt.Errorf("%s: spec.%s: %w", where, field, err)
		}
		return v, nil
	}
	num := func(field string) (int64, error) {
		v, found, err := unstructured.NestedFieldNoCopy(lease.Object, "spec", field)
		if err != nil {
			return 0, fmt.Errorf("%s: spec.%s: %w", where, field, err)
		}
		if !found || v == nil {
			return 0, nil
		}
		switch n := v.(type) {
		case int64:
			return n, nil
		case float64:
			return int64(n), nil
		}
		return 0, fmt.Errorf("%s: spec.%s: a %T, not an integer", where, field, v)
	}
	var err error
	if r.holder, err = str("holderIdentity"); err != nil {
		return r, err
	}
	if r.acquireTime, err = str("acquireTime"); err != nil {
		return r, err
	}
	if r.renewTime, err = str("renewTime"); err != nil {
		return r, err
	}
	if r.strategy, err = str("strategy"); err != nil {
		return r, err
	}
	if r.preferred, err = str("preferredHolder"); err != nil {
		return r, err
	}
	if r.durationSeconds, err = num("leaseDurationSeconds"); err != nil {
		return r, err
	}
	if r.transitions, err = num("leaseTransitions"); err != nil {
		return r, err
	}
	return r, nil
}

// setLeaseRecord writes rec into a Lease's spec, leaving its other fields
// as they are.
func setLeaseRecord(lease *unstructured.Unstructured, rec leaseRecord) error {
	spec, _, err := unstructured.NestedMap(lease.Object, "spec")
	if err != nil {
		return fmt.Errorf("the Lease %s/%s: spec: %w", lease.GetNamespace(), lease.GetName(), err)
	}
	if spec == nil {
		spec = map[string]any{}
	}
	spec["holderIdentity"] = rec.holder
	spec["leaseDurationSeconds"] = rec.durationSeconds
	spec["acquireTime"] = rec.acquireTime
	spec["renewTime"] = rec.renewTime
	spec["leaseTransitions"] = rec.transitions
	return unstructured.SetNestedMap(lease.Object, spec, "spec")
}
