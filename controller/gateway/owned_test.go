package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestEvictionBesideInitialize: at --max-sessions the session chosen to
// make room is closed beside the new client's initialize, which does not
// wait for it (the go-sdk's Close waits for the session's handlers, for
// as long as a handler runs); the close is the gateway's, and serving
// ends only once it has. The evicted session is unknown (404) at once.
// Before, the close ran inside the new client's initialize.
func TestEvictionBesideInitialize(t *testing.T) {
	g := New(Options{Logger: testLogger(t), MaxSessions: 1})
	release := make(chan struct{})
	var closed atomic.Int32
	g.closeSession = func(ss *mcp.ServerSession) {
		<-release
		_ = ss.Close()
		closed.Add(1)
	}
	url, stop := serveOn(t, g, "127.0.0.1:0", "")
	old := initSession(t, url, nil)

	initialized := make(chan error, 1)
	go func() {
		resp, body, err := postNoT(url, initializeBody)
		if err == nil && (resp.StatusCode != http.StatusOK || resp.Header.Get(sessionIDHeader) == "") {
			err = fmt.Errorf("initialize: %d %s", resp.StatusCode, body)
		}
		initialized <- err
	}()
	select {
	case err := <-initialized:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitTimeout):
		close(release)
		t.Fatal("the new client's initialize waited for the evicted session's close")
	}
	if got := ping(t, url, old, nil); got != http.StatusNotFound {
		t.Errorf("the evicted session, its close still running, answered %d; want 404", got)
	}
	g.evictions.mu.Lock()
	running := g.evictions.n
	g.evictions.mu.Unlock()
	if running != 1 {
		t.Errorf("%d evictions owned by the gateway while one runs, want 1", running)
	}

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if closed.Load() != 1 {
		t.Error("serving ended before the evicted session's close")
	}
}

// TestEvictionsInFlightBounded: the closes of evicted sessions that run
// beside their new sessions' answers are bounded (maxEvictionsInFlight; 1
// here): past the bound, an initialize closes its victim on its own path,
// so a flood of initializes while closes are slow does not start a
// goroutine for each. Before, every eviction started one.
func TestEvictionsInFlightBounded(t *testing.T) {
	g := New(Options{Logger: testLogger(t), MaxSessions: 1})
	g.evictions.max = 1
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	g.closeSession = func(ss *mcp.ServerSession) {
		entered <- struct{}{}
		<-release
		_ = ss.Close()
	}
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	t.Cleanup(func() { close(release) }) // before serving stops
	awaitClose := func(what string) {
		t.Helper()
		select {
		case <-entered:
		case <-time.After(waitTimeout):
			t.Fatalf("%s was never closed", what)
		}
	}
	initSession(t, url, nil)
	initSession(t, url, nil) // the first's close runs beside, held
	awaitClose("the first session")
	third := make(chan error, 1)
	go func() {
		resp, body, err := postNoT(url, initializeBody)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("initialize: %d %s", resp.StatusCode, body)
		}
		third <- err
	}()
	awaitClose("the second session")
	g.evictions.mu.Lock()
	running := g.evictions.n
	g.evictions.mu.Unlock()
	if running != 1 {
		t.Errorf("%d evictions run beside their answers at a bound of 1, want 1 (the next on its initialize's path)", running)
	}
	select {
	case err := <-third:
		t.Fatalf("the initialize past the bound was answered before its victim's close (%v)", err)
	default:
	}
}

// TestOneSweeperPerTable: a gateway served on TCP and on a control socket
// at once runs one idle-session sweeper and one subscription pruner over
// its one session table and its subscriptions, not one of each per
// listener; they stop when the last listener does, and a listener served
// after that runs them again.
func TestOneSweeperPerTable(t *testing.T) {
	g := New(Options{Logger: testLogger(t), SessionTimeout: time.Hour})
	url, stopTCP := serveOn(t, g, "127.0.0.1:0", "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	local := make(chan error, 1)
	go func() { local <- g.ServeLocal(ctx, ln, nil) }()
	var once sync.Once
	var localErr error
	stopLocal := func() error {
		once.Do(func() { cancel(); localErr = <-local })
		return localErr
	}
	t.Cleanup(func() { _ = stopLocal() })
	// Both listeners answer once both serve (the sweepers start first).
	for _, u := range []string{url, "http://" + ln.Addr().String() + Path} {
		for deadline := time.Now().Add(waitTimeout); ; time.Sleep(10 * time.Millisecond) {
			resp, err := http.Post(u, "application/json", strings.NewReader(pingBody))
			if err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
		}
	}
	g.sweeps.mu.Lock()
	users := g.sweeps.users
	g.sweeps.mu.Unlock()
	if users != 2 {
		t.Fatalf("%d listeners use the sweepers, want 2", users)
	}
	if n := g.sweeps.running.Load(); n != 2 {
		t.Errorf("%d sweepers run for two listeners, want 2 (one idle-session sweeper, one pruner)", n)
	}
	if err := stopTCP(); err != nil {
		t.Fatal(err)
	}
	if n := g.sweeps.running.Load(); n != 2 {
		t.Errorf("%d sweepers run with the control socket still served, want 2", n)
	}
	if err := stopLocal(); err != nil {
		t.Fatal(err)
	}
	if n := g.sweeps.running.Load(); n != 0 {
		t.Errorf("%d sweepers run after every listener stopped", n)
	}

	// A listener served once every other stopped runs them again.
	_, stopAgain := serveOn(t, g, "127.0.0.1:0", "")
	for deadline := time.Now().Add(waitTimeout); g.sweeps.running.Load() != 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d sweepers run for a listener served after the others stopped, want 2", g.sweeps.running.Load())
		}
	}
	if err := stopAgain(); err != nil {
		t.Fatal(err)
	}
	if n := g.sweeps.running.Load(); n != 0 {
		t.Errorf("%d sweepers run after the last listener stopped again", n)
	}
}

// TestRenewalOwned: the renewal of a reconnected backend's subscriptions
// is the gateway's: Close waits for it (it ends with its backend call), and
// none starts after Close. Before, nobody waited for it.
func TestRenewalOwned(t *testing.T) {
	g, _, next := renewing(t) // the renewal waits for next's answer

	var answered atomic.Bool
	closed := make(chan bool, 1)
	go func() {
		g.Close()
		closed <- answered.Load()
	}()
	// Close is under way (it refuses new renewals) before the renewal's
	// call is answered.
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(5 * time.Millisecond) {
		g.renewals.mu.Lock()
		closing := g.renewals.closed
		g.renewals.mu.Unlock()
		if closing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Close never began")
		}
	}
	answered.Store(true)
	next.answer <- nil
	if !<-closed {
		t.Error("Close returned while the renewal's backend call ran")
	}

	// After Close, a reconnect renews nothing (a renewal started would
	// be running now: its call waits for an answer that never comes).
	g.SetUnavailable("g", "", "ping timeout")
	g.Set(Connection{Name: "g", Backend: newGatedBackend(t)})
	g.renewals.mu.Lock()
	running := g.renewals.n
	g.renewals.mu.Unlock()
	if running != 0 {
		t.Errorf("%d renewals started after Close", running)
	}
}
