//go:build unix

package connection

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// headerServer is an in-process go-sdk server that records the headers of
// every request and has tools that send secrets back in errors.
type headerServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []http.Header
}

func newHeaderServer(t *testing.T) *headerServer {
	t.Helper()
	hs := &headerServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "header-server", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object"}`)
	// The tools answer with the credentials of the last request (the SSE
	// handler passes no headers to tools): a server that echoes a
	// credential into an error message.
	srv.AddTool(&mcp.Tool{Name: "fail_rpc", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		h := hs.last()
		auth := h.Get("Authorization")
		data, _ := json.Marshal(map[string]string{"received": auth, "key": h.Get("X-Api-Key")})
		return nil, &jsonrpc.Error{Code: -32042, Message: "rejected credentials " + auth, Data: data}
	})
	srv.AddTool(&mcp.Tool{Name: "fail_result", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{
			&mcp.TextContent{Text: "key " + hs.last().Get("X-Api-Key") + " is not valid"},
		}}, nil
	})
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	sse := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.mu.Lock()
		hs.requests = append(hs.requests, r.Header.Clone())
		hs.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/sse") {
			sse.ServeHTTP(w, r)
			return
		}
		streamable.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

func (hs *headerServer) last() http.Header {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.requests[len(hs.requests)-1]
}

func (hs *headerServer) headers() []http.Header {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return append([]http.Header(nil), hs.requests...)
}

func TestHTTPHeadersAndRedaction(t *testing.T) {
	const (
		token  = "tok-1234567890"
		apiKey = "key-abcdefghij"
	)
	for _, transport := range []string{spec.TransportStreamable, spec.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			hs := newHeaderServer(t)
			secretFile := writeSecret(t, "Bearer "+token)
			path := "/mcp"
			if transport == spec.TransportSSE {
				path = "/sse"
			}
			sp := httpSpec(hs.URL+path, transport)
			sp.HTTP.Headers = []spec.EnvVar{
				{Name: "Authorization", ValueFrom: &spec.ValueFrom{File: secretFile}},
				{Name: "X-Api-Key", ValueFrom: &spec.ValueFrom{Env: "API_KEY"}},
				{Name: "X-Plain", Value: strptr("plain")},
			}
			environ := func(name string) string {
				if name == "API_KEY" {
					return apiKey
				}
				return ""
			}
			s := connect(t, Request{Spec: sp, Environ: environ})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()

			_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "fail_rpc"}, nil)
			if err == nil {
				t.Fatal("fail_rpc succeeded")
			}
			for _, secret := range []string{token, apiKey} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error leaks a secret: %v", err)
				}
			}
			if !strings.Contains(err.Error(), "rejected credentials [redacted]") {
				t.Errorf("error %q lacks the redacted server message", err)
			}
			var wire *jsonrpc.Error
			if !errors.As(err, &wire) {
				t.Fatalf("errors.As(*jsonrpc.Error) failed on %v", err)
			}
			if findServerError(err) != wire {
				t.Errorf("findServerError = %v, want the redacted copy errors.As finds", findServerError(err))
			}
			if wire.Code != -32042 || wire.Message != "rejected credentials [redacted]" {
				t.Errorf("server error = %d %q, want -32042 with a redacted message", wire.Code, wire.Message)
			}
			if d := string(wire.Data); strings.Contains(d, token) || strings.Contains(d, apiKey) || !json.Valid(wire.Data) {
				t.Errorf("server error data = %s: leaks or is not JSON", d)
			}

			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "fail_result"}, nil)
			if err != nil {
				t.Fatalf("fail_result: %v", err)
			}
			if got := textOf(res); !res.IsError || got != "key [redacted] is not valid" {
				t.Errorf("isError result = %v %q, want redacted text", res.IsError, got)
			}

			reqs := hs.headers()
			if len(reqs) < 3 {
				t.Fatalf("server saw %d requests", len(reqs))
			}
			for i, h := range reqs {
				if h.Get("Authorization") != "Bearer "+token || h.Get("X-Api-Key") != apiKey || h.Get("X-Plain") != "plain" {
					t.Errorf("request %d lacks the manifest's headers: %v", i, h)
				}
			}

			// The next connect reads the rotated secret.
			if err := os.WriteFile(secretFile, []byte("Bearer rotated-token\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			s.Close()
			before := len(hs.headers())
			connect(t, Request{Spec: sp, Environ: environ})
			reqs = hs.headers()[before:]
			if len(reqs) == 0 || reqs[0].Get("Authorization") != "Bearer rotated-token" {
				t.Errorf("after rotation the server saw Authorization %q", reqs[0].Get("Authorization"))
			}
		})
	}
}

// A server that is gone before Connect: a clear error, quickly.
func TestHTTPConnectRefused(t *testing.T) {
	url := "http://127.0.0.1:" + strconv.Itoa(testport.Free(t)) + "/mcp"
	for _, transport := range []string{spec.TransportStreamable, spec.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			s, err := Connect(ctx, Request{Name: "refused", Spec: httpSpec(url, transport), Logger: testLogger(t)})
			if err == nil {
				s.Close()
				t.Fatal("Connect succeeded")
			}
			if !strings.Contains(err.Error(), "connection refused") {
				t.Errorf("error %q does not say connection refused", err)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("refused Connect took %s", took)
			}
			if spec.ProcessOf(err) != nil {
				t.Errorf("HTTP error carries process facts")
			}
			if w := findServerError(err); w != nil {
				t.Errorf("a refused connection counts as a server error: %v", w)
			}
		})
	}
}

// The SSE transport ties its event stream to the ctx given to Connect: the
// session must outlive the (bounded, then cancelled) connect ctx.
func TestSessionOutlivesConnectContext(t *testing.T) {
	hs := newHeaderServer(t)
	for _, tc := range []struct{ transport, path string }{
		{spec.TransportStreamable, "/mcp"},
		{spec.TransportSSE, "/sse"},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			s, err := Connect(ctx, Request{Name: "outlive", Spec: httpSpec(hs.URL+tc.path, tc.transport), Logger: testLogger(t)})
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			probeCtx, probeCancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer probeCancel()
			if err := s.Probe(probeCtx); err != nil {
				t.Fatalf("Probe after the connect ctx ended: %v", err)
			}
			select {
			case <-s.Done():
				t.Fatalf("session ended with its connect ctx: %v", s.Err())
			default:
			}
		})
	}
}
