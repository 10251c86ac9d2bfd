//go:build unix

package connection

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server that forgot the session, answering as servers built on the
// TypeScript SDK do, ends the session at the first request that learns it:
// the probe, a call through the go-sdk and a call as bytes each fail with
// mcp.ErrSessionMissing and the session is Done, so that tether reconnects
// at once (and the gateway sends the call again). An answer about
// something else ends nothing.
func TestForgottenSessionEndsIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		ctype  string
		body   string
		ends   bool
	}{
		{"400 as the TypeScript SDK's example answers", http.StatusBadRequest, "application/json",
			`{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`, true},
		{"404 with a JSON-RPC body", http.StatusNotFound, "application/json",
			`{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}`, true},
		{"400 as the Python SDK answers", http.StatusBadRequest, "text/plain; charset=utf-8",
			"Bad Request: No valid session ID provided", true},
		{"400 about something else", http.StatusBadRequest, "application/json",
			`{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}`, false},
		{"400 as text about something else", http.StatusBadRequest, "text/plain; charset=utf-8",
			"Bad Request: invalid JSON", false},
	} {
		for _, op := range []struct {
			name string
			do   func(ctx context.Context, s *Session) error
		}{
			{"probe", func(ctx context.Context, s *Session) error { return s.Probe(ctx) }},
			{"call", func(ctx context.Context, s *Session) error {
				_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, nil)
				return err
			}},
			{"raw call", func(ctx context.Context, s *Session) error {
				_, _, err := s.CallToolRaw(ctx, "echo", nil, nil)
				return err
			}},
		} {
			t.Run(tc.name+"/"+op.name, func(t *testing.T) {
				var forgot atomic.Bool
				h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
				hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if forgot.Load() && r.Header.Get("Mcp-Session-Id") != "" && r.Method == http.MethodPost {
						w.Header().Set("Content-Type", tc.ctype)
						w.WriteHeader(tc.status)
						_, _ = io.WriteString(w, tc.body)
						return
					}
					h.ServeHTTP(w, r)
				}))
				t.Cleanup(hs.Close)
				s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := op.do(ctx, s); err != nil {
					t.Fatalf("before the server forgot: %v", err)
				}
				forgot.Store(true)
				err := op.do(ctx, s)
				if err == nil {
					t.Fatal("no error from a server that refuses the session")
				}
				if !tc.ends {
					if errors.Is(err, mcp.ErrSessionMissing) {
						t.Errorf("an answer about something else read as a lost session: %v", err)
					}
					// Through the go-sdk, a 400 to a call's POST may end the
					// session by the go-sdk's own rule; tether adds nothing.
					if op.name != "call" && s.Err() != nil {
						t.Errorf("an answer about something else ended the session: %v (session: %v)", err, s.Err())
					}
					return
				}
				if !errors.Is(err, mcp.ErrSessionMissing) {
					t.Errorf("error %v, want mcp.ErrSessionMissing", err)
				}
				waitDone(t, s, 5*time.Second)
			})
		}
	}
}

func echoServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "forgetful", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	return srv
}
