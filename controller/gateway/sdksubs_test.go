package gateway

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkSubscriptionKeys counts the URIs the go-sdk server keeps subscribers
// for: its private Server.resourceSubscriptions, read by reflection, so
// that a go-sdk that renames or retypes it fails here, not silently.
func sdkSubscriptionKeys(t *testing.T, s *mcp.Server) int {
	t.Helper()
	v := reflect.ValueOf(s).Elem().FieldByName("resourceSubscriptions")
	if !v.IsValid() || v.Kind() != reflect.Map {
		t.Fatal("the go-sdk server keeps no resourceSubscriptions map any more: check sdksubs.go against this go-sdk")
	}
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem().Len()
}

// TestSDKForgetsURIsOfSessionsThatEnded: clients that subscribe and go
// away without unsubscribing leave the go-sdk server a key per URI, for
// good (the behaviour sweepSDK works around: if a go-sdk upgrade fixes
// it, the sweeper may go); pruning hands those URIs to the sweeper, which
// takes them out, and leaves a URI a live session holds.
func TestSDKForgetsURIsOfSessionsThatEnded(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	g.Set(Connection{Name: "g", Backend: offering(nil, nil, nil, []string{"item://g/{id}"})})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	live := dial(t, g, hs)
	if err := live.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://g/live"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		d := dial(t, g, hs)
		for j := range 5 {
			if err := d.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: fmt.Sprintf("item://g/%d-%d", i, j)}); err != nil {
				t.Fatal(err)
			}
		}
		// One of them also holds the live session's URI.
		if err := d.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://g/live"}); err != nil {
			t.Fatal(err)
		}
		d.cs.Close()
	}
	// The go-sdk ends a session once its DELETE is served.
	waitServerSessions(t, g, 1, "the live one")
	gone := g.pruneSubscriptions(ctx)
	if len(gone) != 15 {
		t.Fatalf("pruning found %d URIs nobody holds, want 15: %v", len(gone), gone)
	}
	if n := sdkSubscriptionKeys(t, g.server); n != 16 {
		t.Fatalf("the go-sdk server keeps %d URIs after their sessions ended, want 16 (15 nobody holds and the live one): has the go-sdk changed? sweepSDK may be needless now", n)
	}
	sweepSDK(ctx, g.server, append(gone, "item://g/live"), testLogger(t))
	if n := sdkSubscriptionKeys(t, g.server); n != 1 {
		t.Errorf("after the sweep the go-sdk server keeps %d URIs, want the live session's alone", n)
	}
	if uris, places := heldSubscriptions(t, g); len(uris) != 1 || uris["item://g/live"] != 1 || places != 1 {
		t.Errorf("the gateway holds %v (%d places), want item://g/live for the live session", uris, places)
	}
	// A second sweep opens a session of its own and leaves none behind:
	// the live one stays alone.
	sweepSDK(ctx, g.server, []string{"item://g/none"}, testLogger(t))
	waitServerSessions(t, g, 1, "the live one alone")
}

// TestSDKForgetsURIsOfRemovedConnections: a URI the gateway forgot when
// its connection's manifest was removed, while a session held it, is kept
// by the go-sdk server for that session; once the session ended without
// unsubscribing, pruning hands it to the sweeper all the same.
func TestSDKForgetsURIsOfRemovedConnections(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	g.Set(Connection{Name: "g", Backend: offering(nil, nil, nil, []string{"item://g/{id}"})})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	d := dial(t, g, hs)
	if err := d.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://g/1"}); err != nil {
		t.Fatal(err)
	}
	g.Remove("g")
	if uris, places := heldSubscriptions(t, g); len(uris) != 0 || places != 0 {
		t.Fatalf("after its connection was removed the gateway holds %v (%d places)", uris, places)
	}
	if got := g.pruneSubscriptions(ctx); len(got) != 0 {
		t.Errorf("pruning, with the session live, took out %v", got)
	}
	d.cs.Close()
	waitServerSessions(t, g, 0, "none")
	gone := g.pruneSubscriptions(ctx)
	if len(gone) != 1 || gone[0] != "item://g/1" {
		t.Fatalf("pruning found %v, want item://g/1", gone)
	}
	sweepSDK(ctx, g.server, gone, testLogger(t))
	if n := sdkSubscriptionKeys(t, g.server); n != 0 {
		t.Errorf("after the sweep the go-sdk server keeps %d URIs, want none", n)
	}
	if got := g.pruneSubscriptions(ctx); len(got) != 0 {
		t.Errorf("a second pruning took out %v again", got)
	}
}

// TestSweepLeavesNoSession: a sweep's session of the gateway's own ends
// with the sweep (between sweeps the server has none to tell of tool
// changes), and the next sweep's URIs are taken out all the same.
func TestSweepLeavesNoSession(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	g.Set(Connection{Name: "g", Backend: offering(nil, nil, nil, []string{"item://g/{id}"})})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sweepSDK(ctx, g.server, []string{"item://g/none"}, testLogger(t))
	waitServerSessions(t, g, 0, "none after a sweep: the sweep left its session behind")
	d := dial(t, g, hs)
	if err := d.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://g/1"}); err != nil {
		t.Fatal(err)
	}
	d.cs.Close()
	var gone []string
	for deadline := time.Now().Add(waitTimeout); len(gone) == 0; {
		if gone = g.pruneSubscriptions(ctx); len(gone) == 0 && time.Now().After(deadline) {
			t.Fatal("the URI of a session that ended was never pruned")
		}
		time.Sleep(10 * time.Millisecond) // the go-sdk ends the session once its DELETE is served: no event for it
	}
	sweepSDK(ctx, g.server, gone, testLogger(t))
	if n := sdkSubscriptionKeys(t, g.server); n != 0 {
		t.Errorf("after a sweep on an ended session the go-sdk server keeps %d URIs, want none", n)
	}
}
