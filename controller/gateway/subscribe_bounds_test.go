package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// heldSubscriptions is the gateway's bookkeeping of subscriptions: URI →
// how many sessions hold it, and the places all sessions take. A session
// counted with no place left is an error: its count should be gone.
func heldSubscriptions(t *testing.T, g *Gateway) (uris map[string]int, places int) {
	t.Helper()
	g.subs.mu.Lock()
	defer g.subs.mu.Unlock()
	uris = map[string]int{}
	for uri, sub := range g.subs.byURI {
		uris[uri] = len(sub.sessions)
	}
	for _, n := range g.subs.perSession {
		if n <= 0 {
			t.Errorf("a session is counted with %d places", n)
		}
		places += n
	}
	return uris, places
}

// expectBackend reads what the backend heard next, in order.
func expectBackend(t *testing.T, b *richBackend, want ...string) {
	t.Helper()
	for _, w := range want {
		select {
		case got := <-b.subs:
			if got != w {
				t.Fatalf("backend heard %q, want %q", got, w)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("backend never heard %q", w)
		}
	}
}

// expectUpdate sends the backend's update for uri until rc gets it.
func expectUpdate(t *testing.T, b *richBackend, rc *richClient, uri string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		_ = b.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
		select {
		case got := <-rc.updates:
			if got != uri {
				t.Fatalf("update for %s, want %s", got, uri)
			}
			return
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("no update for %s", uri)
		}
	}
}

// twoSubscribed is a gateway (opts, with a test logger) in front of the
// rich backend b, and two classic clients: a holds item://b/1 and
// item://b/2, which the backend was subscribed to; ctx ends with the test.
func twoSubscribed(t *testing.T, opts Options) (b *richBackend, g *Gateway, a, other *richClient, ctx context.Context) {
	t.Helper()
	b = newRichBackend(t, "b")
	opts.Logger = testLogger(t)
	g = New(opts)
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	g.Set(Connection{Name: "b", Prefix: "pb", Backend: b.connect(t)})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	a, other = dialRich(t, url, "", nil), dialRich(t, url, "", nil)
	for _, uri := range []string{"item://b/1", "item://b/2"} {
		if err := a.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
		expectBackend(t, b, "subscribe "+uri)
	}
	return b, g, a, other, ctx
}

// TestSubscriptionsPerSessionBound: a classic session holds at most
// --max-subscriptions-per-session URIs; one more is refused naming the
// flag, and nothing else is lost: its subscriptions still deliver, a
// re-subscribe to one it holds is no new place, another session is
// unaffected, and an unsubscribe frees a place.
func TestSubscriptionsPerSessionBound(t *testing.T) {
	b, g, a, other, ctx := twoSubscribed(t, Options{MaxSubscriptionsPerSession: 2})
	err := a.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://b/3"})
	if err == nil || !strings.Contains(err.Error(), "--max-subscriptions-per-session") || !strings.Contains(err.Error(), "holds 2 resource subscriptions") {
		t.Fatalf("the third subscribe of a session bounded to 2: %v, want an error naming --max-subscriptions-per-session", err)
	}
	if err := a.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://b/1"}); err != nil {
		t.Errorf("subscribing again to a URI the session holds, at the bound: %v", err)
	}
	if uris, places := heldSubscriptions(t, g); len(uris) != 2 || places != 2 {
		t.Errorf("the gateway holds %v (%d places), want item://b/1 and item://b/2 once each", uris, places)
	}
	expectUpdate(t, b, a, "item://b/1")
	if err := other.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://b/3"}); err != nil {
		t.Fatalf("another session: %v", err)
	}
	expectBackend(t, b, "subscribe item://b/3")
	expectUpdate(t, b, other, "item://b/3")
	if err := a.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "item://b/2"}); err != nil {
		t.Fatal(err)
	}
	expectBackend(t, b, "unsubscribe item://b/2")
	if err := a.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://b/3"}); err != nil {
		t.Fatalf("after an unsubscribe freed a place: %v", err)
	}
	if uris, places := heldSubscriptions(t, g); len(uris) != 2 || uris["item://b/3"] != 2 || places != 3 {
		t.Errorf("the gateway holds %v (%d places), want item://b/1 once and item://b/3 twice", uris, places)
	}
}

// TestSubscriptionsTotalBound: the gateway subscribes at most
// --max-subscriptions distinct URIs upstream; a subscribe to a new URI past
// it is refused naming the flag, one to a URI already held is not, and a
// place comes back when its last subscriber lets go or its session ends.
func TestSubscriptionsTotalBound(t *testing.T) {
	b, g, a, other, ctx := twoSubscribed(t, Options{MaxSubscriptions: 2})
	err := other.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://b/3"})
	if err == nil || !strings.Contains(err.Error(), "(--max-subscriptions)") || !strings.Contains(err.Error(), "subscriptions to 2 resources") {
		t.Fatalf("a third distinct URI with the gateway bounded to 2: %v, want an error naming --max-subscriptions", err)
	}
	if err := other.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://b/2"}); err != nil {
		t.Errorf("a URI the gateway holds already, at the bound: %v", err)
	}
	expectUpdate(t, b, other, "item://b/2")
	// a leaves without unsubscribing: pruning frees item://b/1's place
	// (item://b/2 is still other's).
	a.cs.Close()
	deadline := time.Now().Add(waitTimeout)
	for {
		g.pruneSubscriptions(ctx)
		if uris, _ := heldSubscriptions(t, g); len(uris) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the places of a session that ended were never freed")
		}
		time.Sleep(20 * time.Millisecond) // the go-sdk ends the session once the DELETE is served: no event for it
	}
	expectBackend(t, b, "unsubscribe item://b/1")
	if err := other.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://b/3"}); err != nil {
		t.Fatalf("after a place was freed: %v", err)
	}
	expectBackend(t, b, "subscribe item://b/3")
	if uris, places := heldSubscriptions(t, g); len(uris) != 2 || places != 2 {
		t.Errorf("the gateway holds %v (%d places), want item://b/2 and item://b/3 once each", uris, places)
	}
}

// listenBody is a 2026-07-28 client's subscriptions/listen request for uris.
func listenBody(uris ...string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen", "params": map[string]any{
		"notifications": map[string]any{"resourceSubscriptions": uris},
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    modernProtocol,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw-listener", "version": "0"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		},
	}})
	return string(b)
}

// TestSubscriptionsBoundsModern: a 2026-07-28 client subscribes with
// subscriptions/listen, one session per request: a listen naming more URIs
// than --max-subscriptions-per-session, or new URIs past
// --max-subscriptions, is answered with the error naming the flag, and the
// URIs it took before are given back (upstream too); a classic client's
// subscriptions stay.
func TestSubscriptionsBoundsModern(t *testing.T) {
	b := newRichBackend(t, "b")
	g := New(Options{Logger: testLogger(t), MaxSubscriptionsPerSession: 2, MaxSubscriptions: 3})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	g.Set(Connection{Name: "b", Prefix: "pb", Backend: b.connect(t)})
	listen := http.Header{methodHeader: {"subscriptions/listen"}, nameHeader: {""}}

	got := eraPost(t, url, listenBody("item://b/1", "item://b/2", "item://b/3"), listen, "")
	if !strings.Contains(got.Messages, "--max-subscriptions-per-session") || !strings.Contains(got.Messages, `"error"`) {
		t.Fatalf("a listen for 3 URIs, bounded to 2 per session: %d %s", got.Status, got.Messages)
	}
	expectBackend(t, b, "subscribe item://b/1", "subscribe item://b/2")
	var gone []string
	for range 2 {
		select {
		case s := <-b.subs:
			gone = append(gone, s)
		case <-time.After(waitTimeout):
			t.Fatalf("the refused listen's URIs were not given back upstream: %v", gone)
		}
	}
	slices.Sort(gone)
	if !slices.Equal(gone, []string{"unsubscribe item://b/1", "unsubscribe item://b/2"}) {
		t.Errorf("backend heard %v, want both URIs unsubscribed", gone)
	}
	if uris, places := heldSubscriptions(t, g); len(uris) != 0 || places != 0 {
		t.Errorf("after the refused listen the gateway holds %v (%d places), want nothing", uris, places)
	}

	// A classic client takes 3 URIs, the gateway's bound: a 2026-07-28
	// listen for a new one is refused, one for a URI held is not.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	a := dialRich(t, url, "", nil)
	other := dialRich(t, url, "", nil)
	for i, uri := range []string{"item://b/1", "item://b/2", "item://b/3"} {
		rc := a
		if i == 2 {
			rc = other
		}
		if err := rc.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
		expectBackend(t, b, "subscribe "+uri)
	}
	got = eraPost(t, url, listenBody("item://b/4"), listen, "")
	if !strings.Contains(got.Messages, "(--max-subscriptions)") || !strings.Contains(got.Messages, `"error"`) {
		t.Fatalf("a listen for a new URI past the gateway's bound of 3: %d %s", got.Status, got.Messages)
	}
	if uris, places := heldSubscriptions(t, g); len(uris) != 3 || places != 3 {
		t.Errorf("the gateway holds %v (%d places), want the classic clients' 3", uris, places)
	}
	expectUpdate(t, b, a, "item://b/1")
	expectUpdate(t, b, other, "item://b/3")
	select {
	case s := <-b.subs:
		t.Errorf("the refused listens reached the backend: %q", s)
	default:
	}
}

// TestSubscriptionsBoundModernSDKClient: the go-sdk's 2026-07-28 client
// over stdio (one session for all its listens) meets the per-session bound
// too: the URI past it never reaches the backend, and the ones before keep
// delivering.
func TestSubscriptionsBoundModernSDKClient(t *testing.T) {
	b := newRichBackend(t, "b")
	g := New(Options{Logger: testLogger(t), MaxSubscriptionsPerSession: 1})
	g.Set(Connection{Name: "b", Prefix: "pb", Backend: b.connect(t)})
	ct, st := mcp.NewInMemoryTransports()
	go func() { _ = g.serveTransport(t.Context(), st, "stdio") }()
	rc := dialRichOn(t, ct, modernProtocol, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := rc.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://b/1"}); err != nil {
		t.Fatal(err)
	}
	expectBackend(t, b, "subscribe item://b/1")
	expectUpdate(t, b, rc, "item://b/1")
	// The go-sdk client does not wait for a listen's answer: the refusal
	// shows as the bookkeeping, once the listen was served.
	if err := rc.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://b/2"}); err != nil {
		t.Fatal(err)
	}
	if err := rc.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://b/3"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitTimeout)
	for g.subs.refused.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the listens past the bound were never refused")
		}
		time.Sleep(10 * time.Millisecond) // polling a counter: no event for it
	}
	if uris, places := heldSubscriptions(t, g); len(uris) != 1 || places != 1 {
		t.Errorf("the gateway holds %v (%d places), want item://b/1 alone", uris, places)
	}
	expectUpdate(t, b, rc, "item://b/1")
	select {
	case s := <-b.subs:
		t.Errorf("a URI past the bound reached the backend: %q", s)
	default:
	}
	// Ending the listen (the go-sdk client's Unsubscribe) frees the place.
	if err := rc.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "item://b/1"}); err != nil {
		t.Fatal(err)
	}
	expectBackend(t, b, "unsubscribe item://b/1")
	// The URI's entry goes once the backend's answer is in.
	deadline = time.Now().Add(waitTimeout)
	for {
		uris, places := heldSubscriptions(t, g)
		if len(uris) == 0 && places == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the listen ended the gateway holds %v (%d places)", uris, places)
		}
		time.Sleep(5 * time.Millisecond) // polling the bookkeeping: no event for it
	}
}

// TestSubscriptionsFullWarnsOnceAMinute: refusals at --max-subscriptions
// are told to the operator in one WARN a minute, not one per refusal.
func TestSubscriptionsFullWarnsOnceAMinute(t *testing.T) {
	logs := &lockedBuffer{}
	g, hs := newTestGateway(t, Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), MaxSubscriptions: 1})
	g.Set(Connection{Name: "g", Backend: offering(nil, nil, nil, []string{"item://g/{id}"})})
	d := dial(t, g, hs)
	ctx := t.Context()
	if err := d.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://g/1"}); err != nil {
		t.Fatal(err)
	}
	const warn = "gateway refuses resource subscriptions"
	refuse := func() {
		t.Helper()
		if err := d.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://g/2"}); err == nil || !strings.Contains(err.Error(), "--max-subscriptions") {
			t.Fatalf("a second distinct URI at --max-subscriptions 1: %v", err)
		}
	}
	for range 3 {
		refuse()
	}
	if n := strings.Count(logs.String(), warn); n != 1 {
		t.Errorf("%d WARNs for 3 refusals within a minute, want 1:\n%s", n, logs.String())
	}
	// A minute later, the next refusal is told again.
	g.subs.warned.Add(-int64(time.Minute))
	refuse()
	if n := strings.Count(logs.String(), warn); n != 2 {
		t.Errorf("%d WARNs once a minute passed, want 2:\n%s", n, logs.String())
	}
	if strings.Count(logs.String(), "max=1") != 2 {
		t.Errorf("the WARN does not give the bound:\n%s", logs.String())
	}
}

// TestSubscriptionURIBound: a subscribe naming a URI longer than
// MaxSubscriptionURIBytes is refused with an error naming the bound, in
// both eras (resources/subscribe, and a 2026-07-28 subscriptions/listen),
// and nothing of it is held or sent upstream; a URI at the bound is served.
func TestSubscriptionURIBound(t *testing.T) {
	b := newRichBackend(t, "b")
	g := New(Options{Logger: testLogger(t)})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	g.Set(Connection{Name: "b", Prefix: "pb", Backend: b.connect(t)})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	long := "item://b/" + strings.Repeat("x", MaxSubscriptionURIBytes-len("item://b/")+1)
	wantErr := "the gateway's bound on a subscribed URI is 8192 bytes"

	a := dialRich(t, url, "", nil)
	err := a.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: long})
	if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), "of 8193 bytes") {
		t.Fatalf("a subscribe to a URI of 8193 bytes: %v, want an error naming the bound", err)
	}
	if len(err.Error()) > 512 {
		t.Errorf("the refusal echoes the URI: %d bytes", len(err.Error()))
	}
	listen := http.Header{methodHeader: {"subscriptions/listen"}, nameHeader: {""}}
	got := eraPost(t, url, listenBody(long), listen, "")
	if !strings.Contains(got.Messages, wantErr) || !strings.Contains(got.Messages, `"error"`) {
		t.Fatalf("a listen for a URI of 8193 bytes: %d %s", got.Status, got.Messages)
	}
	if uris, places := heldSubscriptions(t, g); len(uris) != 0 || places != 0 {
		t.Errorf("after the refusals the gateway holds %v (%d places), want nothing", uris, places)
	}
	if n := sdkSubscriptionKeys(t, g.server); n != 0 {
		t.Errorf("after the refusals the go-sdk server keeps %d URIs, want none", n)
	}
	select {
	case s := <-b.subs:
		t.Fatalf("a refused URI reached the backend: %.80q", s)
	default:
	}
	atBound := long[:MaxSubscriptionURIBytes]
	if err := a.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: atBound}); err != nil {
		t.Fatalf("a subscribe to a URI of %d bytes, the bound: %v", len(atBound), err)
	}
	expectBackend(t, b, "subscribe "+atBound)
}
