package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/spec"
)

// holdingTransport delivers the client's messages as they come, except
// that an input-required result waits for hold to return first.
type holdingTransport struct {
	inner mcp.Transport
	hold  func()
}

func (h *holdingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := h.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &holdingConn{Connection: c, hold: h.hold}, nil
}

type holdingConn struct {
	mcp.Connection
	hold func()
}

func (c *holdingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if r, ok := msg.(*jsonrpc.Response); ok && err == nil && bytes.Contains(r.Result, []byte(`"input_required"`)) {
		c.hold()
	}
	return msg, err
}

// TestRoundAnsweredAfterTheCallEnded: a backend that asks its client
// something while its call is in flight and ends the call without waiting
// for the answer (the question was its own business, related to the call
// only by timing). The 2026-07-28 client was already handed the question;
// its next round gets the call's result, not "no call in flight".
func TestRoundAnsweredAfterTheCallEnded(t *testing.T) {
	asked := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "leave", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			go func() { _, _ = req.Session.ListRoots(ctx, nil) }()
			select {
			case <-asked:
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "left"}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	s, err := connection.Connect(ctx, connection.Request{Name: "a", Spec: &spec.Spec{HTTP: &spec.HTTPSpec{URL: hs.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	g := New(Options{Logger: testLogger(t)})
	g.Set(Connection{Name: "a", Prefix: "pa", Backend: s, CallTimeout: 5 * time.Second})

	// The client reads the question only once the backend call has ended.
	var once sync.Once
	hold := func() {
		once.Do(func() {
			close(asked)
			deadline := time.Now().Add(waitTimeout)
			for time.Now().Before(deadline) {
				ended := true
				g.rounds.mu.Lock()
				for _, cr := range g.rounds.m {
					select {
					case <-cr.done:
					default:
						ended = false
					}
				}
				g.rounds.mu.Unlock()
				if ended {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Error("the backend call did not end")
		})
	}
	ct, st := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- g.serveTransport(ctx, st, "stdio") }()
	rc := dialRichOn(t, &holdingTransport{inner: ct, hold: hold}, "", nil)
	if v := rc.cs.InitializeResult().ProtocolVersion; v < modernProtocol {
		t.Fatalf("the client negotiated %s: this test needs %s", v, modernProtocol)
	}
	res, err := rc.cs.CallTool(ctx, &mcp.CallToolParams{Name: "pa_leave"})
	if err != nil || res.IsError || textOf(res) != "left" {
		t.Errorf("pa_leave = %+v, %v; want the call's result", res, err)
	}
	rc.cs.Close()
	cancel()
	<-served
}

// TestParkedCallsBounded: between rounds a 2026-07-28 call holds no slot
// of --max-calls-in-flight while its backend call runs on; such parked
// calls are bounded by the same number. Past it, the backend's question is
// refused (it says so) and the call ends with what the backend makes of
// that; once a parked call's round came, a new one may park again.
func TestParkedCallsBounded(t *testing.T) {
	f := newFastFixture(t, true, 0)
	f.g.rounds.mu.Lock()
	f.g.rounds.max = 1
	f.g.rounds.mu.Unlock()
	question := func(got eraAnswer) (state, id string) {
		t.Helper()
		var msg struct {
			Result struct {
				RequestState  string                     `json:"requestState"`
				InputRequests map[string]json.RawMessage `json:"inputRequests"`
			} `json:"result"`
		}
		_ = json.Unmarshal([]byte(got.Messages[strings.LastIndex(got.Messages, "\n")+1:]), &msg)
		for id := range msg.Result.InputRequests {
			return msg.Result.RequestState, id
		}
		return "", ""
	}
	first, firstID := question(eraPost(t, f.url, eraCall("a_roots", nil), nil, ""))
	if first == "" {
		t.Fatal("the first call was not asked the backend's question")
	}
	got := eraPost(t, f.url, eraCall("a_roots", nil), nil, "")
	if state, _ := question(got); state != "" || !strings.Contains(got.Messages, "--max-calls-in-flight") {
		t.Fatalf("a second call while one is parked at a bound of 1: %+v; want the question refused, naming the flag", got)
	}
	got = eraPost(t, f.url, eraCall("a_roots", func(p, _ map[string]any) {
		p["requestState"] = first
		p["inputResponses"] = map[string]any{firstID: map[string]any{"roots": []any{}}}
	}), nil, "")
	if !strings.Contains(got.Messages, "roots: []") {
		t.Fatalf("the parked call's next round: %+v", got)
	}
	third, _ := question(eraPost(t, f.url, eraCall("a_roots", nil), nil, ""))
	if third == "" {
		t.Fatal("a call after the parked one's round was not asked: its place was not given back")
	}

	// A round that answers nothing the backend waits for: the call is no
	// longer parked (a request serves it again), though it goes on.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url, strings.NewReader(eraCall("a_roots", func(p, _ map[string]any) {
		p["requestState"] = third
		p["inputResponses"] = map[string]any{"r-none": map[string]any{"roots": []any{}}}
	})))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(protocolVersionHeader, modernProtocol)
	req.Header.Set(methodHeader, methodCallTool)
	req.Header.Set(nameHeader, "a_roots")
	resumed := make(chan struct{})
	go func() {
		defer close(resumed)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(waitTimeout)
	for {
		f.g.rounds.mu.Lock()
		n := f.g.rounds.parked
		f.g.rounds.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a resumed call still counts as parked (%d)", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if state, _ := question(eraPost(t, f.url, eraCall("a_roots", nil), nil, "")); state == "" {
		t.Error("a call while the only parked one is being served again was not asked")
	}
	cancel()
	<-resumed
}
