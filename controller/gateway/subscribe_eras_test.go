package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestModernSubscriptions: a 2026-07-28 client subscribes to a resource
// (a subscriptions/listen request), gets its updates, and unsubscribes by
// ending that request: the backend hears both, over stdio and HTTP.
func TestModernSubscriptions(t *testing.T) {
	for _, mode := range []string{"stdio", "http"} {
		t.Run(mode, func(t *testing.T) {
			b := newRichBackend(t, "b")
			g := New(Options{Logger: testLogger(t)})
			url, _ := serveOn(t, g, "127.0.0.1:0", "")
			g.Set(Connection{Name: "b", Prefix: "pb", Backend: b.connect(t)})
			var rc *richClient
			if mode == "http" {
				rc = dialRich(t, url, "2026-07-28", nil)
			} else {
				ct, st := mcp.NewInMemoryTransports()
				go func() { _ = g.serveTransport(t.Context(), st, "stdio") }()
				rc = dialRichOn(t, ct, "2026-07-28", nil)
			}
			if v := rc.cs.InitializeResult().ProtocolVersion; v != modernProtocol {
				t.Fatalf("negotiated %s", v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := rc.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://b/9"}); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-b.subs:
				if got != "subscribe item://b/9" {
					t.Fatalf("backend saw %q", got)
				}
			case <-ctx.Done():
				t.Fatal("backend never saw subscribe")
			}
			// The client's subscription is in place once its listen request
			// is acknowledged, which Subscribe does not wait for: send the
			// update until it arrives.
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
		updated:
			for {
				_ = b.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "item://b/9"})
				select {
				case uri := <-rc.updates:
					if uri != "item://b/9" {
						t.Fatalf("update for %s", uri)
					}
					break updated
				case <-tick.C:
				case <-ctx.Done():
					t.Fatal("no update")
				}
			}
			if err := rc.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "item://b/9"}); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-b.subs:
				if got != "unsubscribe item://b/9" {
					t.Fatalf("backend saw %q", got)
				}
			case <-ctx.Done():
				t.Fatal("the backend never heard the unsubscribe")
			}
		})
	}
}
