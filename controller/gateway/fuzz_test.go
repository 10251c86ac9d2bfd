package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What the gateway parses, fuzzed: the HTTP bodies clients send (through the
// go-sdk's handler and the gateway's own bookkeeping of session POSTs) and the tool
// definitions backends send. docs/reliability.md, row G7.
//
// Run one for longer with, e.g.:
//   go test ./controller/gateway -run '^$' -fuzz FuzzGatewayRequest -fuzztime 2m -parallel 1

// echoBackend answers every call with its arguments.
type echoBackend struct{ fakeBackend }

func (*echoBackend) CallTool(_ context.Context, p *mcp.CallToolParams, _ func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(p.Arguments.(json.RawMessage))}}}, nil
}

// FuzzGatewayRequest: any POST body, inside a session or outside one, is
// answered within a bound and never with a 5xx, and the session still
// answers a well-formed call afterwards.
func FuzzGatewayRequest(f *testing.F) {
	g := New(Options{Version: "fuzz"})
	g.Set(Connection{Name: "fz", Prefix: "fz", Backend: withTools(&echoBackend{},
		[]*mcp.Tool{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}})})
	h := g.handler

	do := func(body []byte, session string) *httptest.ResponseRecorder {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set(sessionIDHeader, session)
			req.Header.Set(protocolVersionHeader, "2025-11-25")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if ctx.Err() != nil {
			f.Fatalf("no answer within 5s to %q", body)
		}
		return rec
	}
	init := do([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}`), "")
	session := init.Header().Get(sessionIDHeader)
	if init.Code != http.StatusOK || session == "" {
		f.Fatalf("initialize: %d %q", init.Code, init.Body.String())
	}
	do([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), session)

	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fz_echo","arguments":{"a":1}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope"}}`,
		`[{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}]`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"fz_echo","arguments":[1,2]}}`,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":6,"method":"initialize","params":null}`,
		`not json`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, inSession bool) {
		s := ""
		if inSession {
			s = session
		}
		if rec := do(body, s); rec.Code >= 500 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.String())
		}
		rec := do([]byte(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"fz_echo","arguments":{"still":"here"}}}`), session)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `still`) {
			t.Fatalf("after %q the session no longer answers: %d %s", body, rec.Code, rec.Body.String())
		}
	})
}

// FuzzExposeTool: whatever input schema a backend sends, the tool is
// published (after repair, or in its minimal form), and its definition is
// valid JSON.
func FuzzExposeTool(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string"}}}`,
		`{}`, `null`, `"object"`, `[1]`, `{"type":["object","null"]}`, `{"type":"array"}`,
		`{"type":"object","properties":{"a":{"$ref":"#/nope"}}}`,
		`{"type":"object","x-mcp-header":{"a":1}}`,
	} {
		f.Add("t", []byte(s))
	}
	f.Fuzz(func(t *testing.T, name string, schema []byte) {
		tool := &mcp.Tool{Name: name}
		if json.Valid(schema) {
			var v any
			_ = json.Unmarshal(schema, &v)
			tool.InputSchema = v
		}
		et := exposeTool(tool, exposedName("p", name))
		if def, err := json.Marshal(et.tool); err != nil || !json.Valid(def) {
			t.Fatalf("definition %q is not JSON: %v", def, err)
		}
		s := mcp.NewServer(&mcp.Implementation{Name: "fuzz", Version: "0"}, nil)
		h := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil }
		if err := tryAddTool(s, et.tool, h); err != nil {
			if err2 := tryAddTool(s, minimalTool(et.tool), h); err2 != nil {
				t.Fatalf("neither the repaired (%v) nor the minimal tool (%v) was accepted: %q", err, err2, schema)
			}
		}
	})
}
