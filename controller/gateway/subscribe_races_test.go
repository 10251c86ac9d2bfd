package gateway

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// gatedBackend offers the template item://g/{id}; each resources/subscribe
// and unsubscribe it gets is announced on calls and answered when the test
// sends the answer. held is what it holds once its calls returned.
type gatedBackend struct {
	catalogBackend
	calls  chan string
	answer chan error
	stop   chan struct{} // closed when the test ends: calls still waiting fail
	mu     sync.Mutex
	held   map[string]bool
}

func newGatedBackend(t *testing.T) *gatedBackend {
	b := &gatedBackend{catalogBackend: *offering(nil, nil, nil, []string{"item://g/{id}"}),
		calls: make(chan string, 8), answer: make(chan error), stop: make(chan struct{}), held: map[string]bool{}}
	t.Cleanup(func() { close(b.stop) })
	return b
}

func (b *gatedBackend) gate(ctx context.Context, call, uri string, hold bool) error {
	b.calls <- call + " " + uri
	select {
	case err := <-b.answer:
		if err == nil {
			b.mu.Lock()
			b.held[uri] = hold
			b.mu.Unlock()
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-b.stop:
		return errors.New("the test ended")
	}
}

func (b *gatedBackend) Subscribe(ctx context.Context, uri string) error {
	return b.gate(ctx, "subscribe", uri, true)
}

func (b *gatedBackend) Unsubscribe(ctx context.Context, uri string) error {
	return b.gate(ctx, "unsubscribe", uri, false)
}

func (b *gatedBackend) holds(uri string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held[uri]
}

// expectCall reads the backend's next call.
func (b *gatedBackend) expectCall(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-b.calls:
		if got != want {
			t.Fatalf("backend got %q, want %q", got, want)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("backend never got %q", want)
	}
}

// waitForWaiter returns once some subscribe waits for the backend call in
// flight (g.subs.waits passes was), and fails the test if the backend gets
// another call meanwhile instead.
func waitForWaiter(t *testing.T, g *Gateway, b *gatedBackend, was int64) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for g.subs.waits.Load() <= was {
		select {
		case got := <-b.calls:
			t.Fatalf("backend got %q while a call for the URI was in flight", got)
		case <-time.After(5 * time.Millisecond): // polling a counter: no event for it
		}
		if time.Now().After(deadline) {
			t.Fatal("the second subscribe never waited for the first")
		}
	}
}

func subscribeAsync(d *downstream, uri string) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- d.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}) }()
	return errc
}

// subscribeThrough has d subscribe to uri, a URI nobody holds yet, and b
// answer the backend's subscribe: the first subscriber's round trip.
func subscribeThrough(t *testing.T, d *downstream, b *gatedBackend, uri string) {
	t.Helper()
	errc := subscribeAsync(d, uri)
	b.expectCall(t, "subscribe "+uri)
	b.answer <- nil
	if err := result(t, errc); err != nil {
		t.Fatalf("subscribe %s: %v", uri, err)
	}
}

func unsubscribeAsync(d *downstream, uri string) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- d.cs.Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: uri}) }()
	return errc
}

// waitServerSessions waits until the go-sdk server holds n sessions (want
// says which): it ends a session once its DELETE is served, or its close
// has run.
func waitServerSessions(t *testing.T, g *Gateway, n int, want string) {
	t.Helper()
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(10 * time.Millisecond) { // polling the server's sessions: no event for them
		got := sessionCount(g)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions left, want %s", got, want)
		}
	}
}

func result(t *testing.T, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(waitTimeout):
		t.Fatal("the request never returned")
		return nil
	}
}

// TestSubscribeAtOnce: two clients that subscribe to a new URI at once
// subscribe the backend once; the second waits for the first's call and
// joins it.
func TestSubscribeAtOnce(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	b := newGatedBackend(t)
	g.Set(Connection{Name: "g", Backend: b})
	a, c := dial(t, g, hs), dial(t, g, hs)
	errA := subscribeAsync(a, "item://g/1")
	b.expectCall(t, "subscribe item://g/1")
	errC := subscribeAsync(c, "item://g/1")
	waitForWaiter(t, g, b, 0)
	b.answer <- nil
	if err := result(t, errA); err != nil {
		t.Fatal(err)
	}
	if err := result(t, errC); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-b.calls:
		t.Fatalf("backend got %q too", got)
	default:
	}
	if uris, places := heldSubscriptions(t, g); uris["item://g/1"] != 2 || places != 2 {
		t.Errorf("the gateway holds %v (%d places), want item://g/1 for both", uris, places)
	}
}

// TestSubscribeFirstFails: when the first subscribe fails upstream, its
// client gets the error and holds nothing, and the client that waited
// makes its own call and holds what the backend gave it.
func TestSubscribeFirstFails(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	b := newGatedBackend(t)
	g.Set(Connection{Name: "g", Backend: b})
	a, c := dial(t, g, hs), dial(t, g, hs)
	errA := subscribeAsync(a, "item://g/1")
	b.expectCall(t, "subscribe item://g/1")
	errC := subscribeAsync(c, "item://g/1")
	waitForWaiter(t, g, b, 0)
	// An unsubscribe from the URI by a session that does not hold it
	// (yet) has nothing to wait for.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := a.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "item://g/1"}); err != nil {
		t.Fatalf("an unsubscribe from a URI the session does not hold waited for the backend: %v", err)
	}
	b.answer <- errors.New("the server is busy")
	if err := result(t, errA); err == nil || !strings.Contains(err.Error(), "the server is busy") {
		t.Fatalf("the failed subscribe answered %v", err)
	}
	b.expectCall(t, "subscribe item://g/1")
	b.answer <- nil
	if err := result(t, errC); err != nil {
		t.Fatal(err)
	}
	if uris, places := heldSubscriptions(t, g); uris["item://g/1"] != 1 || places != 1 || !b.holds("item://g/1") {
		t.Errorf("the gateway holds %v (%d places), want item://g/1 once", uris, places)
	}
	// The client whose subscribe failed holds no place: its unsubscribe
	// does not take the other's from the backend.
	if err := a.cs.Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: "item://g/1"}); err != nil {
		t.Fatal(err)
	}
	if uris, _ := heldSubscriptions(t, g); uris["item://g/1"] != 1 {
		t.Errorf("after the failed client's unsubscribe the gateway holds %v", uris)
	}
}

// TestSubscribeDuringLastUnsubscribe: a subscribe that comes while the
// last unsubscribe of its URI is reaching the backend waits for it and
// then subscribes the backend again: sent at once, it could reach the
// backend before the unsubscribe, which then dropped the new client's
// subscription.
func TestSubscribeDuringLastUnsubscribe(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	b := newGatedBackend(t)
	g.Set(Connection{Name: "g", Backend: b})
	a, c := dial(t, g, hs), dial(t, g, hs)
	subscribeThrough(t, a, b, "item://g/1")
	unsub := unsubscribeAsync(a, "item://g/1")
	b.expectCall(t, "unsubscribe item://g/1")
	was := g.subs.waits.Load()
	errC := subscribeAsync(c, "item://g/1")
	waitForWaiter(t, g, b, was)
	b.answer <- nil
	if err := result(t, unsub); err != nil {
		t.Fatal(err)
	}
	b.expectCall(t, "subscribe item://g/1")
	b.answer <- nil
	if err := result(t, errC); err != nil {
		t.Fatal(err)
	}
	if uris, places := heldSubscriptions(t, g); uris["item://g/1"] != 1 || places != 1 || !b.holds("item://g/1") {
		t.Errorf("the gateway holds %v (%d places), the backend item://g/1: %v; want both to hold it", uris, places, b.holds("item://g/1"))
	}
}

// TestSubscriptionsFreedWhenConnectionRemoved: the subscriptions a removed
// connection's backend held give their places back, and a client that
// subscribes to such a URI again subscribes its new owner.
func TestSubscriptionsFreedWhenConnectionRemoved(t *testing.T) {
	g, hs := newTestGateway(t, Options{MaxSubscriptions: 1})
	b := newGatedBackend(t)
	g.Set(Connection{Name: "g", Backend: b})
	a := dial(t, g, hs)
	subscribeThrough(t, a, b, "item://g/1")
	g.Remove("g")
	if uris, places := heldSubscriptions(t, g); len(uris) != 0 || places != 0 {
		t.Errorf("after its connection was removed the gateway holds %v (%d places)", uris, places)
	}
	next := newGatedBackend(t)
	g.Set(Connection{Name: "h", Backend: next})
	errA := subscribeAsync(a, "item://g/1")
	next.expectCall(t, "subscribe item://g/1")
	next.answer <- nil
	if err := result(t, errA); err != nil {
		t.Fatalf("subscribing again once the connection left: %v", err)
	}
	if uris, places := heldSubscriptions(t, g); uris["item://g/1"] != 1 || places != 1 {
		t.Errorf("the gateway holds %v (%d places), want item://g/1 through h", uris, places)
	}
}

// renewing is a gateway whose connection g reconnected while client a
// held item://g/1 through it: the new backend, next, is being subscribed
// again (the renewal), its call waiting for next's answer.
func renewing(t *testing.T) (g *Gateway, a *downstream, next *gatedBackend) {
	t.Helper()
	g, hs := newTestGateway(t, Options{})
	b := newGatedBackend(t)
	g.Set(Connection{Name: "g", Backend: b})
	a = dial(t, g, hs)
	subscribeThrough(t, a, b, "item://g/1")
	g.SetUnavailable("g", "", "ping timeout")
	next = newGatedBackend(t)
	g.Set(Connection{Name: "g", Backend: next})
	next.expectCall(t, "subscribe item://g/1") // the renewal
	return g, a, next
}

// TestRenewalBeforeUnsubscribe: a reconnected backend is subscribed again
// to the URIs clients hold through it; an unsubscribe that comes while
// that renewal runs reaches the backend after it, so the backend is left
// holding nothing nobody holds.
func TestRenewalBeforeUnsubscribe(t *testing.T) {
	g, a, next := renewing(t)
	was := g.subs.waits.Load()
	unsub := unsubscribeAsync(a, "item://g/1")
	waitForWaiter(t, g, next, was)
	next.answer <- nil
	next.expectCall(t, "unsubscribe item://g/1")
	next.answer <- nil
	if err := result(t, unsub); err != nil {
		t.Fatal(err)
	}
	if uris, places := heldSubscriptions(t, g); len(uris) != 0 || places != 0 || next.holds("item://g/1") {
		t.Errorf("the gateway holds %v (%d places), the backend item://g/1: %v; want neither to hold it", uris, places, next.holds("item://g/1"))
	}
}

// TestPruneWaitsOneURIAtATime: while pruning unsubscribes the backend from
// one URI a session that ended held, a client subscribing to another such
// URI is served at once (the backend still holds it), and pruning leaves
// that URI subscribed: it does not wait for the calls for the other URIs.
func TestPruneWaitsOneURIAtATime(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	b := newGatedBackend(t)
	g.Set(Connection{Name: "g", Backend: b})
	a, c := dial(t, g, hs), dial(t, g, hs)
	for _, uri := range []string{"item://g/1", "item://g/2"} {
		subscribeThrough(t, a, b, uri)
	}
	a.cs.Close()
	waitServerSessions(t, g, 1, "c's")
	pruned := make(chan []string, 1)
	go func() { pruned <- g.pruneSubscriptions(context.Background()) }()
	var first string
	select {
	case first = <-b.calls:
	case <-time.After(waitTimeout):
		t.Fatal("pruning never unsubscribed the backend")
	}
	other := "item://g/1"
	if first == "unsubscribe item://g/1" {
		other = "item://g/2"
	}
	errC := subscribeAsync(c, other)
	select {
	case err := <-errC:
		if err != nil {
			t.Fatal(err)
		}
	case got := <-b.calls:
		t.Fatalf("backend got %q while pruning's first call was in flight", got)
	case <-time.After(waitTimeout):
		t.Fatalf("a subscribe to %s waited for pruning's call for another URI", other)
	}
	b.answer <- nil
	select {
	case uris := <-pruned:
		if len(uris) != 1 || "unsubscribe "+uris[0] != first {
			t.Errorf("pruning took out %v, want the URI of %q alone", uris, first)
		}
	case got := <-b.calls:
		t.Fatalf("pruning went on to %q, a URI c holds", got)
	case <-time.After(waitTimeout):
		t.Fatal("pruning never returned")
	}
	if uris, places := heldSubscriptions(t, g); len(uris) != 1 || uris[other] != 1 || places != 1 || !b.holds(other) {
		t.Errorf("the gateway holds %v (%d places), the backend %s: %v; want both to hold it", uris, places, other, b.holds(other))
	}
}

// TestSubscriptionStaysWithItsOwner: when another connection comes to own
// a URI that clients hold through the first (the first stopped offering
// it), a client that joins the subscription joins the first's; the last
// unsubscribe reaches the backend that holds the subscription, not the new
// owner, which was never subscribed.
func TestSubscriptionStaysWithItsOwner(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	a, b := newGatedBackend(t), newGatedBackend(t)
	g.Set(Connection{Name: "a", Backend: a})
	g.Set(Connection{Name: "b", Backend: b})
	c1, c2 := dial(t, g, hs), dial(t, g, hs)
	subscribeThrough(t, c1, a, "item://g/1")
	a.templates = nil // a stops offering the URI: b owns it now
	g.Set(Connection{Name: "a", Backend: a})
	if err := result(t, subscribeAsync(c2, "item://g/1")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*downstream{c1, c2} {
		unsub := unsubscribeAsync(c, "item://g/1")
		if c == c2 {
			select {
			case got := <-b.calls:
				t.Fatalf("the new owner, never subscribed, got %q", got)
			case got := <-a.calls:
				if got != "unsubscribe item://g/1" {
					t.Fatalf("the subscribed backend got %q, want the unsubscribe", got)
				}
				a.answer <- nil
			case <-time.After(waitTimeout):
				t.Fatal("the last unsubscribe reached no backend")
			}
		}
		if err := result(t, unsub); err != nil {
			t.Fatal(err)
		}
	}
	if uris, places := heldSubscriptions(t, g); len(uris) != 0 || places != 0 || a.holds("item://g/1") {
		t.Errorf("the gateway holds %v (%d places), a holds item://g/1: %v; want neither", uris, places, a.holds("item://g/1"))
	}
}

// TestSubscribeRoutedBeforeAToolsChange: a subscribe routed to a target
// that a tools change then replaced (the same backend session) still
// finds its connection, the subscription's owner. The window lies between
// the route's lookup and the owner's (subscribe), so the lookup is taken
// apart here: found for no connection, the URI was forgotten as soon as
// the backend had subscribed, its client answered as subscribed got no
// update, and the backend was never unsubscribed. A target of a backend
// session that a reconnect replaced finds none: that session is gone.
func TestSubscribeRoutedBeforeAToolsChange(t *testing.T) {
	g, _ := newTestGateway(t, Options{})
	b := offering([]string{"t"}, nil, nil, []string{"item://g/{id}"})
	g.Set(Connection{Name: "g", Backend: b})
	routed, _ := g.cat.Load().resourceRoute("item://g/1")
	if routed == nil {
		t.Fatal("item://g/1 has no route")
	}
	b.setTools(append(b.Tools(), &mcp.Tool{Name: "u", InputSchema: objectSchema}))
	g.Set(Connection{Name: "g", Backend: b}) // its tools changed
	g.mu.Lock()
	st := g.conns["g"]
	replaced := st.target != routed
	g.mu.Unlock()
	if !replaced {
		t.Fatal("the tools change kept the target: nothing to show")
	}
	if got := g.connOf(routed); got != st {
		t.Errorf("a target replaced for new tools finds connection %v, want g's: the subscription would have no owner", got)
	}
	g.Set(Connection{Name: "g", Backend: offering([]string{"t"}, nil, nil, []string{"item://g/{id}"})}) // a reconnect
	if got := g.connOf(routed); got != nil {
		t.Errorf("a target of a backend session a reconnect replaced finds connection %v, want none", got.name)
	}
}
