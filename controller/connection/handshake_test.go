//go:build unix

package connection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestEndpointGates(t *testing.T) {
	h := &endpointGates{gates: map[string]*endpointGate{}}
	ctx := context.Background()
	r1, err := h.acquire(ctx, "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := h.acquire(ctx, "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	// Another endpoint has slots of its own.
	rb, err := h.acquire(ctx, "b", 2)
	if err != nil {
		t.Fatalf("endpoint b waited for endpoint a: %v", err)
	}
	rb()

	// A third handshake to a waits until one ends.
	got := make(chan func(), 1)
	go func() {
		r, err := h.acquire(ctx, "a", 2)
		if err != nil {
			t.Error(err)
			r = func() {}
		}
		got <- r
	}()
	waitUntil(t, "a waiter", func() bool { _, w := h.inFlight("a"); return w == 1 })
	select {
	case <-got:
		t.Fatal("a third handshake to a full endpoint did not wait")
	default:
	}
	r1()
	r1() // a second release gives nothing back twice
	r3 := <-got
	if hold, wait := h.inFlight("a"); hold != 2 || wait != 0 {
		t.Errorf("in flight %d, waiting %d; want 2 and 0", hold, wait)
	}

	// A waiter whose connect times out gives up with a clear error.
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := h.acquire(tctx, "a", 2); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "2 handshakes with this endpoint are in flight") {
		t.Errorf("timed-out wait = %v, want a deadline error naming the limit", err)
	}
	r2()
	r3()
	h.mu.Lock()
	left := len(h.gates)
	h.mu.Unlock()
	if left != 0 {
		t.Errorf("%d gates left with nothing in flight", left)
	}
}

// Connects to one endpoint beyond the Connector's HandshakesPerEndpoint
// (DefaultHandshakesPerEndpoint when it is not set) wait for a slot: the
// server never sees more handshakes at once, and every session comes up.
func TestConnectHandshakesPerEndpoint(t *testing.T) {
	for _, tc := range []struct {
		set, limit int
	}{
		{0, DefaultHandshakesPerEndpoint},
		{-1, DefaultHandshakesPerEndpoint},
		{3, 3},
	} {
		t.Run(fmt.Sprintf("set %d", tc.set), func(t *testing.T) {
			conn := NewConnector(ConnectorOptions{HandshakesPerEndpoint: tc.set})
			t.Cleanup(conn.Close)
			if conn.perEndpoint != tc.limit {
				t.Fatalf("a Connector's gate is %d per endpoint, want %d", conn.perEndpoint, tc.limit)
			}
			testHandshakesPerEndpoint(t, conn, tc.limit)
		})
	}
}

func testHandshakesPerEndpoint(t *testing.T, conn *Connector, limit int) {
	n := limit + 4
	srv := mcp.NewServer(&mcp.Implementation{Name: "gated", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	var active, peak atomic.Int32
	unblock := make(chan struct{})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" { // the handshake's last step
				cur := active.Add(1)
				for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
				}
				defer active.Add(-1)
				select {
				case <-unblock:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return next(ctx, method, req)
		}
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	key := "streamable " + hs.URL

	var wg sync.WaitGroup
	sessions := make(chan *Session, n)
	for range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := conn.Connect(ctx, Request{Name: "gated", Spec: httpSpec(hs.URL, ""), Logger: testLogger(t)})
			if err != nil {
				t.Errorf("Connect: %v", err)
				return
			}
			sessions <- s
		})
	}
	waitUntil(t, "the endpoint's slots full and the rest waiting", func() bool {
		hold, wait := conn.handshakes.inFlight(key)
		return hold == limit && wait == n-limit && int(active.Load()) == limit
	})
	close(unblock)
	wg.Wait()
	close(sessions)
	got := 0
	for s := range sessions {
		got++
		_ = s.Close()
	}
	if got != n {
		t.Errorf("%d of %d sessions connected", got, n)
	}
	if p := int(peak.Load()); p != limit {
		t.Errorf("the server saw %d handshakes at once, want %d", p, limit)
	}
	if hold, wait := conn.handshakes.inFlight(key); hold != 0 || wait != 0 {
		t.Errorf("after the handshakes: %d in flight, %d waiting", hold, wait)
	}
}

// waitUntil polls ok until it holds, for up to 10 s.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A connect that times out waiting for a slot never asked the server: the
// endpoint's version memory survives it, and a failed handshake gives its
// slot back.
func TestHandshakeGateFailures(t *testing.T) {
	url, sent := methodServer(t, false)
	key := "streamable " + url
	conn := newConnector(t)
	connectWith(t, conn, Request{Spec: httpSpec(url, "")}) // learns the version

	var held []func()
	for range conn.perEndpoint {
		r, err := conn.handshakes.acquire(context.Background(), key, conn.perEndpoint)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := conn.Connect(ctx, Request{Name: "queued", Spec: httpSpec(url, ""), Logger: testLogger(t)})
	cancel()
	if err == nil || !strings.Contains(err.Error(), "waiting to connect") {
		t.Fatalf("Connect with every slot taken = %v, want a wait error", err)
	}
	for _, r := range held {
		r()
	}
	conn.versions.mu.Lock()
	_, known := conn.versions.m[key]
	conn.versions.mu.Unlock()
	if !known {
		t.Error("a connect that never reached the server dropped the endpoint's version memory")
	}
	connectWith(t, conn, Request{Spec: httpSpec(url, "")})
	if n := len(sent("server/discover")); n != 1 {
		t.Errorf("server/discover sent %d times, want 1 (the memory was used)", n)
	}

	// A handshake that fails gives its slot back.
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	t.Cleanup(dead.Close)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := conn.Connect(ctx, Request{Name: "dead", Spec: httpSpec(dead.URL, ""), Logger: testLogger(t)}); err == nil {
		t.Fatal("Connect to a server that answers 500 succeeded")
	}
	if hold, wait := conn.handshakes.inFlight("streamable " + dead.URL); hold != 0 || wait != 0 {
		t.Errorf("after a failed handshake: %d in flight, %d waiting", hold, wait)
	}
}

// inFlight reports the handshakes in flight to endpoint and those waiting
// (tests).
func (h *endpointGates) inFlight(endpoint string) (holding, waiting int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.gates[endpoint]
	if g == nil {
		return 0, 0
	}
	return len(g.slots), g.users - len(g.slots)
}
