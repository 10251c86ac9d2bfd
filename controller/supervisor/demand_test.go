package supervisor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// blockingConnector blocks every Connect until its ctx ends.
type blockingConnector struct {
	started chan struct{}
}

func (c *blockingConnector) Connect(ctx context.Context, req ConnectRequest) (Session, error) {
	c.started <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

func lazyConn() *spec.McpConnection {
	c := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "lazy"}, Spec: spec.Spec{
		Stdio: &spec.StdioSpec{Command: "server"}, Lifecycle: &spec.Lifecycle{Mode: spec.LifecycleOnDemand}}}
	c.Default()
	return c
}

func runLoop(t *testing.T, notified chan struct{}, step func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var loop sync.WaitGroup
	loop.Add(1)
	go func() {
		defer loop.Done()
		for {
			select {
			case <-notified:
				step()
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); loop.Wait() })
}

// blockingSupervisor is a supervisor whose attempts block until cancelled,
// and the channel of its requests for a reconcile.
func blockingSupervisor(t *testing.T) (*Supervisor, *blockingConnector, chan struct{}) {
	conn := &blockingConnector{started: make(chan struct{}, 10)}
	notified := make(chan struct{}, 100)
	sup := New(context.Background(), Options{Name: "lazy", Connector: conn,
		Notify: func() { notified <- struct{}{} }, Jitter: func() float64 { return 0 }})
	t.Cleanup(func() { sup.Close("over"); _ = sup.Wait(context.Background()) })
	return sup, conn, notified
}

// A Demand waiting for an attempt in flight is told of a Suspend at once.
func TestDemandToldOfSuspendDuringItsAttempt(t *testing.T) {
	sup, conn, notified := blockingSupervisor(t)
	c := lazyConn()
	var mu sync.Mutex
	suspended := false
	step := func() {
		mu.Lock()
		s := suspended
		mu.Unlock()
		if s {
			sup.Suspend(context.Background())
			return
		}
		sup.Step(context.Background(), Want{Conn: c, Dormant: true})
	}
	step()
	runLoop(t, notified, step)
	res := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := sup.Demand(ctx)
		res <- err
	}()
	<-conn.started // the demanded attempt runs
	mu.Lock()
	suspended = true
	mu.Unlock()
	start := time.Now()
	notified <- struct{}{} // the reconcile that sees the suspend
	err := <-res
	t.Logf("demand returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Demand was not told of the Suspend: it waited for its own deadline")
	}
}

// A Demand while the connection waits for a login is told so at once.
func TestDemandAwaitingLoginAnswersAtOnce(t *testing.T) {
	notified := make(chan struct{}, 100)
	conn := &authConnector{errs: []error{authErr{login: true}}}
	sup := New(context.Background(), Options{Name: "one", Connector: conn,
		Notify: func() { notified <- struct{}{} }, Jitter: func() float64 { return 0 }})
	t.Cleanup(func() { sup.Close("over"); _ = sup.Wait(context.Background()) })
	c := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "one"}, Spec: spec.Spec{HTTP: &spec.HTTPSpec{URL: "http://h/mcp"}}}
	c.Default()
	step := func() { sup.Step(context.Background(), Want{Conn: c}) }
	step()
	<-notified
	step()
	if !sup.Snapshot().AwaitingLogin {
		t.Fatal("not awaiting login")
	}
	runLoop(t, notified, step)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := sup.Demand(ctx)
	t.Logf("demand returned after %v: %v; snapshot Idle=%v demanded stays", time.Since(start).Round(time.Millisecond), err, sup.Snapshot().Idle)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Demand on a connection awaiting login waited for its deadline instead of saying a login is needed")
	}
}

// Dormant + a spec change while the demanded attempt runs: the attempt is
// cancelled and a new one starts for the new spec, for the same demand.
func TestDemandSurvivesASpecChangeDuringItsAttempt(t *testing.T) {
	sup, conn, notified := blockingSupervisor(t)
	c := lazyConn()
	var mu sync.Mutex
	cur := c
	step := func() {
		mu.Lock()
		w := cur
		mu.Unlock()
		sup.Step(context.Background(), Want{Conn: w, Dormant: true})
	}
	step()
	runLoop(t, notified, step)
	res := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := sup.Demand(ctx)
		res <- err
	}()
	<-conn.started
	c2 := c.DeepCopy()
	c2.Spec.Stdio.Args = []string{"--v2"}
	mu.Lock()
	cur = c2
	mu.Unlock()
	notified <- struct{}{}
	select {
	case <-conn.started:
		t.Log("a new attempt started for the new spec")
	case err := <-res:
		t.Logf("demand: %v", err)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the demand was lost with the cancelled attempt")
		}
	}
}

// A suspended dormant connection is not Idle (Idle would have the reconciler
// hand its catalog to the gateway).
func TestSuspendedDormantIsNotIdle(t *testing.T) {
	sup := New(context.Background(), Options{Name: "lazy", Connector: &connector{}, Jitter: func() float64 { return 0 }})
	t.Cleanup(func() { sup.Close("over"); _ = sup.Wait(context.Background()) })
	sup.Step(context.Background(), Want{Conn: lazyConn(), Dormant: true})
	sup.Suspend(context.Background())
	if sup.Snapshot().Idle {
		t.Errorf("after Suspend the snapshot still says Idle")
	}
}
