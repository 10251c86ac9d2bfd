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

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/spec"
)

// prettyWriter re-frames every SSE response event of a go-sdk backend with its
// JSON indented over several data: lines: valid SSE (lines are joined with \n)
// and valid JSON.
type prettyWriter struct{ http.ResponseWriter }

func (p prettyWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }
func (p prettyWriter) Write(b []byte) (int, error) {
	if !bytes.Contains(b, []byte(`"result"`)) {
		return p.ResponseWriter.Write(b)
	}
	var out bytes.Buffer
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			out.WriteString(line + "\n")
			continue
		}
		var ind bytes.Buffer
		if json.Indent(&ind, []byte(data), "", "  ") != nil {
			out.WriteString(line + "\n")
			continue
		}
		for _, l := range strings.Split(ind.String(), "\n") {
			out.WriteString("data: " + l + "\n")
		}
	}
	o := bytes.TrimSuffix(out.Bytes(), []byte("\n"))
	_, err := p.ResponseWriter.Write(o)
	return len(b), err
}

type holdFixture struct {
	g    *Gateway
	tb   *testBackend
	url  string
	stop func() error
}

func newHoldFixture(t *testing.T, fast bool, wrap func(http.Handler) http.Handler, shutdown time.Duration) *holdFixture {
	t.Helper()
	f := &holdFixture{tb: newTestBackend("a")}
	unblock := make(chan struct{})
	f.tb.srv.AddTool(&mcp.Tool{Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			f.tb.entered <- struct{}{}
			select {
			case <-ctx.Done():
				f.tb.ended <- ctx.Err()
			case <-unblock:
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil
		})
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.tb.srv }, nil)
	if wrap != nil {
		h = wrap(h)
	}
	bs := httptest.NewServer(h)
	t.Cleanup(bs.Close)
	t.Cleanup(func() { close(unblock) })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sess, err := connection.Connect(ctx, connection.Request{Name: "a", Spec: &spec.Spec{HTTP: &spec.HTTPSpec{URL: bs.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close() })
	f.g = New(Options{Logger: testLogger(t), ShutdownTimeout: shutdown})
	f.g.noFastPath.Store(!fast)
	f.g.Set(Connection{Name: "a", Prefix: "a", Backend: sess, CallTimeout: 3 * time.Second})
	f.url, f.stop = serveOn(t, f.g, "127.0.0.1:0", "")
	return f
}

// A backend that frames its answer over several data: lines (legal SSE) and
// sends progress first: the answer the gateway relays on its own event
// stream must still be one JSON-RPC message per event.
func TestFastPathMultiLineAnswerAfterProgress(t *testing.T) {
	pretty := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(prettyWriter{w}, r)
		})
	}
	for _, fast := range []bool{false, true} {
		f := newHoldFixture(t, fast, pretty, time.Second)
		c := rawSession(t, f.g, f.url, "")
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		go func() {
			for range 3 {
				<-f.tb.calls
			}
		}()
		close(f.tb.release)
		_, msgs := c.post(ctx, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a_progress","arguments":{},"_meta":{"progressToken":"p"}}}`)
		cancel()
		var lastOK bool
		lines := strings.Split(msgs, "\n")
		var v map[string]any
		lastOK = json.Unmarshal([]byte(lines[len(lines)-1]), &v) == nil && v["result"] != nil
		t.Logf("fast=%v taken=%d lines=%d last line valid result=%v\n%s", fast, f.g.fastCalls.Load(), len(lines), lastOK, msgs)
		if !lastOK {
			t.Errorf("fast=%v: the answer's last data line is not a JSON-RPC response", fast)
		}
	}
}

// The same with the go-sdk client as the caller.
func TestFastPathMultiLineAnswerGoSDKClient(t *testing.T) {
	pretty := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(prettyWriter{w}, r) })
	}
	for _, fast := range []bool{false, true} {
		f := newHoldFixture(t, fast, pretty, time.Second)
		fx := &fastFixture{g: f.g, url: f.url, obs: &observed{}}
		d := fx.dial(t, "")
		close(f.tb.release)
		p := &mcp.CallToolParams{Name: "a_progress", Arguments: map[string]any{}}
		p.SetProgressToken("p")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		res, err := d.cs.CallTool(ctx, p)
		cancel()
		t.Logf("fast=%v taken=%d res=%v err=%v", fast, f.g.fastCalls.Load(), res, err)
		if err != nil {
			t.Errorf("fast=%v: %v", fast, err)
		}
	}
}

// A session deleted while its call is in flight ends the call, the
// caller's request and the backend's work, on both paths.
func TestSessionDeletedMidCall(t *testing.T) {
	for _, fast := range []bool{false, true} {
		f := newHoldFixture(t, fast, nil, time.Second)
		c := rawSession(t, f.g, f.url, "")
		done := make(chan string, 1)
		go func() {
			_, m := c.post(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a_hold"}}`)
			done <- m
		}()
		<-f.tb.entered
		req, _ := http.NewRequest(http.MethodDelete, f.url, nil)
		req.Header.Set(sessionIDHeader, c.sid)
		req.Header.Set(protocolVersionHeader, c.version)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		select {
		case m := <-done:
			t.Logf("fast=%v: DELETE %d; the call's POST ended: %q", fast, resp.StatusCode, m)
		case <-time.After(3 * time.Second):
			t.Errorf("fast=%v: DELETE %d; the call's POST still open 3s after its session was deleted", fast, resp.StatusCode)
		}
		select {
		case err := <-f.tb.ended:
			t.Logf("fast=%v: backend call ended: %v", fast, err)
		case <-time.After(3 * time.Second):
			t.Errorf("fast=%v: the backend call still runs 3s after its session was deleted", fast)
		}
	}
}
