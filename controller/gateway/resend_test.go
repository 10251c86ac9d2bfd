package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/spec"
)

// TestDeliveredCallIsNotSentAgain: a call that reached the backend (its
// stream started, and was closed for polling) is resumed; the backend,
// restarted meanwhile, answers the resumption as one that lost the session
// (TypeScript SDK servers: 400; the spec: 404). The session ends, but the
// call is not sent again on a new one: the tool may have run (docs/
// reliability.md, row S24). Only a call the server never took is resent.
func TestDeliveredCallIsNotSentAgain(t *testing.T) {
	for _, answer := range []struct {
		name, ctype string
		status      int
		body        string
	}{
		{"TypeScript SDK 400", "application/json", http.StatusBadRequest, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`},
		{"spec 404", "text/plain; charset=utf-8", http.StatusNotFound, "session not found\n"},
	} {
		for _, mode := range []struct {
			fast, era bool
		}{{true, false}, {false, false}, {true, true}, {false, true}} {
			fast := mode.fast
			name := map[bool]string{true: "fast", false: "sdk"}[fast]
			if mode.era {
				// A 2026-07-28 client's call runs in rounds (rounds.go),
				// on either path: the same rule holds there.
				name = "2026-07-28 " + name
			}
			t.Run(answer.name+"/"+name, func(t *testing.T) {
				var execs atomic.Int32
				var forgotten sync.Map
				stop := make(chan struct{})
				t.Cleanup(func() { close(stop) })
				srv := mcp.NewServer(&mcp.Implementation{Name: "ts-like", Version: "1"}, nil)
				srv.AddTool(&mcp.Tool{Name: "work", InputSchema: json.RawMessage(`{"type":"object"}`)},
					func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
						if execs.Add(1) == 1 {
							// The server goes down while the call runs, and comes
							// back without the session.
							forgotten.Store(req.Session.ID(), true)
							req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 20 * time.Millisecond})
							select {
							case <-ctx.Done():
							case <-stop:
							}
							return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "first"}}}, nil
						}
						return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "second"}}}, nil
					})
				h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
					&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
				bs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if _, ok := forgotten.Load(r.Header.Get("Mcp-Session-Id")); ok {
						w.Header().Set("Content-Type", answer.ctype)
						w.WriteHeader(answer.status)
						_, _ = io.WriteString(w, answer.body)
						return
					}
					h.ServeHTTP(w, r)
				}))
				t.Cleanup(bs.Close)
				g, url := wakingGateway(t, bs.URL, fast)
				ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				defer cancel()
				var st int
				var m string
				if mode.era {
					a := eraPost(t, url, eraCall("p_work", nil), nil, "")
					st, m = a.Status, a.Messages
				} else {
					c := rawSession(t, g, url, "")
					st, m = c.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"p_work"}}`)
				}
				if fast && g.fastCalls.Load() != 1 {
					t.Errorf("the call took the go-sdk path, not the fast path")
				}
				t.Logf("fast=%v: %d %s; the tool ran %d times", fast, st, m, execs.Load())
				// The backend's session id never reaches the caller.
				if n := strings.Count(string(m), "session ID: "); n != strings.Count(string(m), "session ID: [redacted]") {
					t.Errorf("a backend session id reached the caller: %s", m)
				}
				// It fails, saying so; or, when the session's end reached
				// the gateway first, that the connection is down.
				if !strings.Contains(string(m), "the server had taken the call") && !strings.Contains(string(m), "connection p is not connected") {
					t.Errorf("the caller's error says neither that the call had reached the server nor that the connection is down: %s", m)
				}
				if n := execs.Load(); n != 1 {
					t.Errorf("a call the backend had received ran %d times", n)
				}
			})
		}
	}
}

// TestLostSessionCallIsSentAgain: a call whose POST the backend refuses as
// of a session it lost (it restarted between two health checks) never
// reached it: the gateway lets the session go, brings the connection back
// and sends the call once more, on the fast path and through the go-sdk,
// for a classic session and a 2026-07-28 client alike (docs/reliability.md
// S24). tether run's TestCallSurvivesBackendRestart, whose clients all
// take the fast path now, no longer reaches the go-sdk path's resend.
func TestLostSessionCallIsSentAgain(t *testing.T) {
	for _, mode := range []struct {
		fast, era bool
	}{{true, false}, {false, false}, {true, true}, {false, true}} {
		name := map[bool]string{true: "fast", false: "sdk"}[mode.fast]
		if mode.era {
			name = "2026-07-28 " + name
		}
		t.Run(name, func(t *testing.T) {
			var execs atomic.Int32
			var seen, forgotten sync.Map
			srv := mcp.NewServer(&mcp.Implementation{Name: "restarts", Version: "1"}, nil)
			srv.AddTool(&mcp.Tool{Name: "work", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					execs.Add(1)
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
				})
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
			bs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
					if _, ok := forgotten.Load(sid); ok {
						http.Error(w, "session not found", http.StatusNotFound)
						return
					}
					seen.Store(sid, true)
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(bs.Close)
			g, url := wakingGateway(t, bs.URL, mode.fast)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			var c *rawClient
			if !mode.era {
				c = rawSession(t, g, url, "")
			}
			// The backend restarts: tether's session is gone there.
			seen.Range(func(sid, _ any) bool { forgotten.Store(sid, true); return true })
			var st int
			var m string
			if mode.era {
				a := eraPost(t, url, eraCall("p_work", nil), nil, "")
				st, m = a.Status, a.Messages
			} else {
				st, m = c.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"p_work"}}`)
			}
			if st != http.StatusOK || !strings.Contains(m, `"text":"done"`) {
				t.Errorf("the call after the restart: %d %s, want the tool's answer", st, m)
			}
			if n := execs.Load(); n != 1 {
				t.Errorf("the tool ran %d times, want once", n)
			}
			if got := g.fastCalls.Load(); (got == 1) != mode.fast {
				t.Errorf("%d calls on the fast path (fast %v)", got, mode.fast)
			}
		})
	}
}

// wakingGateway serves a gateway whose one connection, p (prefix p), is the
// backend at backendURL, kept as the supervisor keeps it: a session that
// ends leaves the gateway, and Wake connects a new one in a context of its
// own (a request's carries the go-sdk server's values, such as a
// 2026-07-28 request's protocol version, which its client would take for
// its own). It returns the gateway and its URL.
func wakingGateway(t *testing.T, backendURL string, fast bool) (*Gateway, string) {
	t.Helper()
	connect := func(ctx context.Context) (*connection.Session, error) {
		s, err := connection.Connect(ctx, connection.Request{Name: "p", Spec: &spec.Spec{HTTP: &spec.HTTPSpec{URL: backendURL}}})
		if err == nil {
			t.Cleanup(func() { s.Close() })
		}
		return s, err
	}
	var g *Gateway
	expose := func(s *connection.Session) {
		g.Set(Connection{Name: "p", Prefix: "p", Backend: s})
		go func() {
			<-s.Done()
			g.SetUnavailable("p", "p", "session lost")
		}()
	}
	g = New(Options{Logger: testLogger(t), Wake: func(context.Context, string) error {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		s, err := connect(ctx)
		if err != nil {
			return err
		}
		expose(s)
		return nil
	}})
	g.noFastPath.Store(!fast)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s, err := connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expose(s)
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	return g, url
}
