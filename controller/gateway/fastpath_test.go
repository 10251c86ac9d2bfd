package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/spec"
)

// fastSecret is a header value of the backend connection: it must never
// reach a caller.
const fastSecret = "Bearer fast-secret-0123456789"

// fastFixture is a gateway, served as tether serves it, in front of one
// go-sdk backend over streamable HTTP reached through connection.Session:
// what the fast path needs.
type fastFixture struct {
	g    *Gateway
	tb   *testBackend
	bs   *httptest.Server
	sess *connection.Session
	obs  *observed
	url  string
	// gate lets the rounds tool end, and the between tool log: each
	// waits for one value there. between says the between tool logged.
	gate, between chan struct{}
}

func newFastFixture(t *testing.T, fast bool, callTimeout time.Duration) *fastFixture {
	t.Helper()
	f := &fastFixture{tb: newTestBackend("a"), obs: &observed{}, gate: make(chan struct{}, 1), between: make(chan struct{}, 1)}
	f.tb.srv.AddTool(&mcp.Tool{Name: "leak", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			got := req.Extra.Header.Get("Authorization")
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "denied for " + got}}}, nil
		})
	f.tb.srv.AddTool(&mcp.Tool{Name: "rpcerr", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: 4242, Message: "custom failure", Data: json.RawMessage(`{"why":"test"}`)}
		})
	f.tb.srv.AddTool(&mcp.Tool{Name: "hopmeta", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{
				Meta:    mcp.Meta{"example.com/kept": "yes", mcp.MetaKeyServerInfo: map[string]any{"name": "forged"}},
				Content: []mcp.Content{&mcp.TextContent{Text: "ok"}},
			}, nil
		})
	// hold blocks until its caller goes or the test ends: a go-sdk server
	// on a classic protocol does not cancel a handler whose POST broke, and
	// closing the server waits for its handlers.
	unblock := make(chan struct{})
	f.tb.srv.AddTool(&mcp.Tool{Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			f.tb.entered <- struct{}{}
			select {
			case <-ctx.Done():
			case <-unblock:
			}
			return nil, errors.New("released")
		})
	// roots and sample relay a request of the backend's to the caller
	// (in rounds for a 2026-07-28 one).
	f.tb.srv.AddTool(&mcp.Tool{Name: "roots", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, err
			}
			b, _ := json.Marshal(res.Roots)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "roots: " + string(b)}}}, nil
		})
	f.tb.srv.AddTool(&mcp.Tool{Name: "sample", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 8,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sampled: " + res.Model}}}, nil
		})
	// rounds asks for roots, then, in what is a 2026-07-28 client's
	// second round, logs, reports progress, waits for the gate and
	// reports progress again.
	f.tb.srv.AddTool(&mcp.Tool{Name: "rounds", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if _, err := req.Session.ListRoots(ctx, nil); err != nil {
				return nil, err
			}
			tok := req.Params.GetProgressToken()
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: "after roots"}); err != nil {
				return nil, err
			}
			if tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 2, Total: 3, Message: "two"})
			}
			select {
			case <-f.gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 3, Total: 3, Message: "three"})
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "rounds done"}}}, nil
		})
	// progask reports progress, then asks for roots.
	f.tb.srv.AddTool(&mcp.Tool{Name: "progask", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "before the question"})
			}
			if _, err := req.Session.ListRoots(ctx, nil); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "asked"}}}, nil
		})
	// between asks for roots and, while the question waits for its
	// answer, logs (once the gate opens) on the call's stream.
	f.tb.srv.AddTool(&mcp.Tool{Name: "between", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			roots := make(chan error, 1)
			go func() {
				_, err := req.Session.ListRoots(ctx, nil)
				roots <- err
			}()
			select {
			case <-f.gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: "between rounds"})
			f.between <- struct{}{}
			if err != nil {
				return nil, err
			}
			if err := <-roots; err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answered"}}}, nil
		})
	f.tb.srv.AddTool(&mcp.Tool{Name: "region", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "regional"}}}, nil
		})
	f.tb.srv.AddTool(&mcp.Tool{Name: "logs", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for _, m := range []struct {
				level mcp.LoggingLevel
				text  string
			}{{"debug", "quiet"}, {"warning", "loud"}} {
				if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: m.level, Data: m.text}); err != nil {
					return nil, err
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "logged"}}}, nil
		})
	f.tb.srv.AddTool(&mcp.Tool{Name: "badparams", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no such argument"}
		})
	f.bs = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.tb.srv }, nil))
	t.Cleanup(f.bs.Close)
	t.Cleanup(func() { close(unblock); close(f.tb.stop) })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	secret := fastSecret
	sess, err := connection.Connect(ctx, connection.Request{
		Name: "a",
		Spec: &spec.Spec{HTTP: &spec.HTTPSpec{URL: f.bs.URL, Headers: []spec.EnvVar{{Name: "Authorization", Value: &secret}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close() })
	f.sess = sess
	f.g = New(Options{Logger: testLogger(t), ObserveCall: f.obs.observe, ShutdownTimeout: time.Second})
	f.g.noFastPath.Store(!fast)
	f.g.Set(Connection{Name: "a", Prefix: "a", Backend: sess, CallTimeout: callTimeout})
	f.url, _ = serveOn(t, f.g, "127.0.0.1:0", "")
	return f
}

// dial connects a go-sdk client; version "" is the classic protocol
// (classicSession). The client declares roots (the go-sdk's default) and
// no sampling.
func (f *fastFixture) dial(t *testing.T, version string) *downstream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	d := &downstream{changed: make(chan struct{}, 64), prog: make(chan *mcp.ProgressNotificationParams, 64)}
	c := mcp.NewClient(&mcp.Implementation{Name: "fast-test-agent", Version: "0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { d.prog <- req.Params },
	})
	c.AddRoots(&mcp.Root{URI: "file:///work/project", Name: "project"})
	opts := classicSession
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.url, MaxRetries: -1}, opts)
	if err != nil {
		t.Fatalf("connect to gateway: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	d.cs = cs
	if v := cs.InitializeResult().ProtocolVersion; v >= modernProtocol {
		if version != v {
			t.Fatalf("the client negotiated %s, want %s", v, version)
		}
		return d // no session to wait for
	}
	// The go-sdk runs InitializedHandler after it answered the client's
	// notifications/initialized: until then the session's calls go through
	// the go-sdk.
	deadline := time.Now().Add(waitTimeout)
	for f.g.downs.get(cs.ID()) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the gateway never tracked the session")
		}
		time.Sleep(time.Millisecond)
	}
	return d
}

// outcome is what a caller can observe of one call.
type outcome struct {
	Result  string // the result's JSON, "" on error
	Code    int64
	Message string
	Metric  string // what ObserveCall saw last
}

func (f *fastFixture) outcome(res *mcp.CallToolResult, err error) outcome {
	var o outcome
	if err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			o.Code, o.Message = je.Code, je.Message
		} else {
			o.Message = err.Error()
		}
	} else {
		b, _ := json.Marshal(res)
		o.Result = string(b)
	}
	f.obs.mu.Lock()
	if n := len(f.obs.calls); n > 0 {
		o.Metric = f.obs.calls[n-1]
	}
	f.obs.mu.Unlock()
	return o
}

// TestFastPathSameAnswers runs each case through the fast path and through
// the go-sdk (fast path off) and requires the same observable answers, and
// the fast path to have been taken exactly where it should: for a client
// of a classic session and for one of the 2026-07-28 protocol, which has
// none (its calls taking the fast path is what the era's figures in the
// README's Performance section rest on).
func TestFastPathSameAnswers(t *testing.T) {
	tests := []fastCase{
		{name: "success", taken: true, contains: `a:{\"msg\":\"hi\"}`,
			run: func(t *testing.T, f *fastFixture, d *downstream) outcome {
				return f.outcome(d.call(context.Background(), "a_echo", map[string]any{"msg": "hi"}))
			}},
		{name: "isError result redacted", taken: true, contains: "denied for " + connection.Redacted,
			run: func(t *testing.T, f *fastFixture, d *downstream) outcome {
				return f.outcome(d.call(context.Background(), "a_leak", map[string]any{}))
			}},
		{name: "hop meta dropped", taken: true, contains: `"example.com/kept":"yes"`,
			run: func(t *testing.T, f *fastFixture, d *downstream) outcome {
				o := f.outcome(d.call(context.Background(), "a_hopmeta", nil))
				if strings.Contains(o.Result, "forged") {
					t.Errorf("the backend's serverInfo reached the caller: %s", o.Result)
				}
				return o
			}},
		{name: "backend JSON-RPC error", taken: true, contains: "custom failure",
			run: func(t *testing.T, f *fastFixture, d *downstream) outcome {
				o := f.outcome(d.call(context.Background(), "a_rpcerr", nil))
				if o.Code != 4242 {
					t.Errorf("code %d, want the backend's 4242", o.Code)
				}
				return o
			}},
		{name: "unknown tool", taken: false, contains: "a_nope",
			run: func(t *testing.T, f *fastFixture, d *downstream) outcome {
				return f.outcome(d.call(context.Background(), "a_nope", nil))
			}},
		{name: "down connection", taken: false, contains: "connection a is not connected: lost",
			run: func(t *testing.T, f *fastFixture, d *downstream) outcome {
				f.g.SetUnavailable("a", "a", "lost")
				return f.outcome(d.call(context.Background(), "a_echo", nil))
			}},
		{name: "timeout", taken: true, timeout: 150 * time.Millisecond, contains: `tool "a_block" timed out after 150ms (callTimeout of connection a)`,
			run: func(t *testing.T, f *fastFixture, d *downstream) outcome {
				o := f.outcome(d.call(context.Background(), "a_block", nil))
				waitEnded(t, f.tb)
				return o
			}},
		{name: "backend killed mid-call", taken: true, contains: `tool "a_hold": connection a: `,
			run: func(t *testing.T, f *fastFixture, d *downstream) outcome {
				errc := make(chan outcome, 1)
				go func() { errc <- f.outcome(d.call(context.Background(), "a_hold", nil)) }()
				<-f.tb.entered
				f.bs.CloseClientConnections()
				select {
				case o := <-errc:
					// The go-sdk words the transport's failure its own way.
					if p := `tool "a_hold": connection a: `; strings.HasPrefix(o.Message, p) {
						o.Message = p
					}
					return o
				case <-time.After(5 * time.Second):
					t.Fatal("call still hanging 5s after its backend went away")
					return outcome{}
				}
			}},
		{name: "trace context and progress", taken: true, contains: "done",
			run: func(t *testing.T, f *fastFixture, d *downstream) outcome {
				const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
				p := &mcp.CallToolParams{Name: "a_progress", Arguments: map[string]any{},
					Meta: mcp.Meta{"traceparent": "00-" + trace + "-00f067aa0ba902b7-01", "com.example/x": "y"}}
				p.SetProgressToken("caller-42")
				resc := make(chan outcome, 1)
				go func() { resc <- f.outcome(d.cs.CallTool(context.Background(), p)) }()
				for i := 1; i <= 3; i++ {
					select {
					case pn := <-d.prog:
						if pn.ProgressToken != "caller-42" || pn.Progress != float64(i) || pn.Total != 3 || pn.Message != fmt.Sprintf("step %d", i) {
							t.Errorf("progress %d = %+v, want token caller-42, %d of 3", i, pn, i)
						}
					case <-time.After(waitTimeout):
						t.Fatalf("progress notification %d never arrived", i)
					}
				}
				close(f.tb.release)
				o := <-resc
				rec := <-f.tb.calls
				if tp, _ := rec.Meta["traceparent"].(string); !strings.Contains(tp, trace) {
					t.Errorf("backend _meta.traceparent = %q, want the caller's trace %s", tp, trace)
				}
				if tok := rec.Meta["progressToken"]; tok == nil || tok == "caller-42" {
					t.Errorf("backend progress token %v: want one of the gateway's own", tok)
				}
				if rec.Meta["com.example/x"] != nil {
					t.Errorf("the caller's other _meta reached the backend: %v", rec.Meta)
				}
				return o
			}},
		{name: "roots relayed", taken: true, contains: `roots: [{\"name\":\"project\",\"uri\":\"file:///work/project\"}]`,
			run: func(t *testing.T, f *fastFixture, d *downstream) outcome {
				return f.outcome(d.call(context.Background(), "a_roots", nil))
			}},
		{name: "sampling not declared", taken: true, contains: "cannot relay sampling/createMessage",
			run: func(t *testing.T, f *fastFixture, d *downstream) outcome {
				return f.outcome(d.call(context.Background(), "a_sample", nil))
			}},
		{name: "backend invalid params", taken: true, contains: "no such argument",
			run: func(t *testing.T, f *fastFixture, d *downstream) outcome {
				return f.outcome(d.call(context.Background(), "a_badparams", nil))
			}},
		{name: "cancelled by the caller", taken: true, contains: "context canceled",
			run: func(t *testing.T, f *fastFixture, d *downstream) outcome {
				ctx, cancel := context.WithCancel(context.Background())
				resc := make(chan outcome, 1)
				go func() { resc <- f.outcome(d.call(ctx, "a_block", nil)) }()
				<-f.tb.entered
				cancel()
				o := <-resc
				waitEnded(t, f.tb)
				waitObserved(t, f.obs, "a/canceled")
				o.Metric = "a/canceled"
				return o
			}},
	}
	for _, era := range []string{"", modernProtocol} {
		for _, tt := range tests {
			name := tt.name
			if era != "" {
				name = era + "/" + name
			}
			t.Run(name, func(t *testing.T) { sameAnswers(t, era, tt) })
		}
	}
}

// sameAnswers runs one case of TestFastPathSameAnswers for clients of
// protocol version era ("": classic).
func sameAnswers(t *testing.T, era string, tt fastCase) {
	var got [2]outcome
	for i, fast := range []bool{false, true} {
		f := newFastFixture(t, fast, tt.timeout)
		d := f.dial(t, era)
		before := f.g.fastCalls.Load()
		got[i] = tt.run(t, f, d)
		if taken := f.g.fastCalls.Load() > before; taken != (fast && tt.taken) {
			t.Errorf("fast path on=%v: taken %v, want %v", fast, taken, fast && tt.taken)
		}
		if all := fmt.Sprint(got[i]); !strings.Contains(all, tt.contains) || strings.Contains(all, "fast-secret") {
			t.Errorf("fast path on=%v: %+v, want it to contain %q and no secret", fast, got[i], tt.contains)
		}
	}
	if got[0] != got[1] {
		t.Errorf("answers differ:\n go-sdk: %+v\n   fast: %+v", got[0], got[1])
	}
}

// fastCase is a case of TestFastPathSameAnswers.
type fastCase struct {
	name     string
	taken    bool
	timeout  time.Duration
	run      func(t *testing.T, f *fastFixture, d *downstream) outcome
	contains string // the error or result must contain it
}

func waitEnded(t *testing.T, tb *testBackend) {
	t.Helper()
	waitEndedOr(t, tb, "the backend never saw the call canceled")
}

// waitEndedOr waits, at most waitTimeout, for tb's blocking tool to end
// cancelled; failing that, the test fails with msg.
func waitEndedOr(t *testing.T, tb *testBackend, msg string) {
	t.Helper()
	select {
	case err := <-tb.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("backend handler ended with %v, want canceled", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal(msg)
	}
}

func waitObserved(t *testing.T, obs *observed, want string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !obs.has(want) {
		if time.Now().After(deadline) {
			t.Fatalf("ObserveCall saw %v, want %s", obs.calls, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFastPathNotTaken: each unsafe request goes to the go-sdk and gets its
// answer.
func TestFastPathNotTaken(t *testing.T) {
	f := newFastFixture(t, true, 0)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a_echo","arguments":{"msg":"x"}}}`
	tests := []struct {
		name    string
		version string // of the caller's session
		sid     string // "" = the session's own
		body    string
		status  int
	}{
		{"version mismatch", "2025-06-18", "", call, http.StatusOK},
		{"batch", "", "", "[" + call + "]", http.StatusBadRequest},
		{"unknown session", "", "never-issued", call, http.StatusNotFound},
		{"not tools/call", "", "", `{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{}}`, http.StatusOK},
		{"io.modelcontextprotocol _meta", "", "", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"a_echo","_meta":{"io.modelcontextprotocol/x":1}}}`, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := rawSession(t, f.g, f.url, tt.version)
			if tt.sid != "" {
				c.sid = tt.sid
			}
			before := f.g.fastCalls.Load()
			status, msgs := c.post(ctx, tt.body)
			if status != tt.status {
				t.Errorf("status %d, want %d (%s)", status, tt.status, msgs)
			}
			if f.g.fastCalls.Load() != before {
				t.Error("the fast path answered")
			}
		})
	}

	t.Run("backend without raw calls", func(t *testing.T) {
		be, tools, _ := newTestBackend("m").connect(t)
		f.g.Set(Connection{Name: "m", Prefix: "m", Backend: withTools(be, tools)})
		c := rawSession(t, f.g, f.url, "")
		before := f.g.fastCalls.Load()
		if status, msgs := c.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"m_echo"}}`); status != http.StatusOK || !strings.Contains(msgs, "m:") {
			t.Errorf("status %d %s", status, msgs)
		}
		if f.g.fastCalls.Load() != before {
			t.Error("the fast path answered for an in-memory backend")
		}
	})

	// The session table closes idle sessions from every request
	// (closeIdleSessions): no call is sent to the go-sdk for the sake of
	// its idle timer, however long it may run.
	t.Run("session timeout shorter than callTimeout is taken", func(t *testing.T) {
		g := New(Options{Logger: testLogger(t), SessionTimeout: time.Minute})
		g.Set(Connection{Name: "a", Prefix: "a", Backend: f.sess, CallTimeout: time.Hour})
		url, _ := serveOn(t, g, "127.0.0.1:0", "")
		c := rawSession(t, g, url, "")
		if status, msgs := c.post(ctx, call); status != http.StatusOK || !strings.Contains(msgs, "a:") {
			t.Errorf("status %d %s", status, msgs)
		}
		if g.fastCalls.Load() != 1 {
			t.Error("the fast path did not answer a call that could outlive the session timeout")
		}
	})

	t.Run("plain call is taken", func(t *testing.T) {
		c := rawSession(t, f.g, f.url, "")
		before := f.g.fastCalls.Load()
		status, msgs := c.post(ctx, `{"jsonrpc":"2.0","id":"s-1","method":"tools/call","params":{"name":"a_echo","arguments":{"msg":"x"}}}`)
		if status != http.StatusOK || !strings.Contains(msgs, `"id":"s-1"`) || !strings.Contains(msgs, `a:{\"msg\":\"x\"}`) {
			t.Errorf("status %d %s", status, msgs)
		}
		if f.g.fastCalls.Load() != before+1 {
			t.Error("the fast path did not answer a plain call")
		}
	})
}

// TestFastPathCancelNotification: a caller's notifications/cancelled, which
// arrives as its own POST while the call's POST stays open, reaches the
// backend; and so does a caller that disconnects without one. A notice
// whose reason reads "tools/call" is a notice all the same: the method is
// read from the message, not found in its bytes.
func TestFastPathCancelNotification(t *testing.T) {
	notices := map[string]string{
		"notification":        `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c-1"}}`,
		"notification naming": `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c-1","reason":"tools/call"}}`,
	}
	for _, how := range []string{"notification", "notification naming", "disconnect"} {
		t.Run(how, func(t *testing.T) {
			f := newFastFixture(t, true, 0)
			c := rawSession(t, f.g, f.url, "")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan string, 1)
			go func() {
				_, msgs := c.post(ctx, `{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"a_block"}}`)
				done <- msgs
			}()
			select {
			case <-f.tb.entered:
			case <-time.After(waitTimeout):
				t.Fatal("the backend never saw the call")
			}
			if notice := notices[how]; notice != "" {
				sctx, scancel := context.WithTimeout(context.Background(), waitTimeout)
				defer scancel()
				if status, msgs := c.post(sctx, notice); status != http.StatusAccepted {
					t.Errorf("notifications/cancelled: status %d %s, want 202", status, msgs)
				}
			} else {
				cancel()
			}
			waitEnded(t, f.tb)
			waitObserved(t, f.obs, "a/canceled")
			if notices[how] != "" {
				if msgs := <-done; !strings.Contains(msgs, "call canceled by the client") {
					t.Errorf("answer %s, want the cancellation error", msgs)
				}
			}
			if f.g.fastCalls.Load() != 1 {
				t.Errorf("fast calls %d, want 1", f.g.fastCalls.Load())
			}
		})
	}
}

// rawClient speaks streamable HTTP by hand, on one gateway session.
type rawClient struct {
	url, sid, version string
}

// rawSession initializes a session at version ("" = 2025-11-25).
func rawSession(t *testing.T, g *Gateway, url, version string) *rawClient {
	t.Helper()
	if version == "" {
		version = "2025-11-25"
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c := &rawClient{url: url, version: version}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.sid = resp.Header.Get(sessionIDHeader)
	if c.sid == "" {
		t.Fatalf("initialize: status %d, no session id", resp.StatusCode)
	}
	if status, msgs := c.post(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("initialized: status %d %s", status, msgs)
	}
	// See fastFixture.dial.
	for g.downs.get(c.sid) == nil {
		if ctx.Err() != nil {
			t.Fatal("the gateway never tracked the session")
		}
		time.Sleep(time.Millisecond)
	}
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, url, nil)
		req.Header.Set(sessionIDHeader, c.sid)
		req.Header.Set(protocolVersionHeader, c.version)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return c
}

// post sends body and returns the status and the messages of the answer
// (JSON or the data of an event stream), one per line.
func (c *rawClient) post(ctx context.Context, body string) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(sessionIDHeader, c.sid)
	req.Header.Set(protocolVersionHeader, c.version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(bytes.TrimSpace(b))
	}
	var msgs []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			msgs = append(msgs, data)
		}
	}
	return resp.StatusCode, strings.Join(msgs, "\n")
}
