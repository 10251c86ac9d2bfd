package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// eraCall is a 2026-07-28 tools/call of tool as the go-sdk client sends
// it: its _meta carries what a classic client says at initialize. edit
// changes the params before they are encoded.
func eraCall(tool string, edit func(params, meta map[string]any)) string {
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    modernProtocol,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw-era", "version": "0"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"roots": map[string]any{"listChanged": true}},
	}
	params := map[string]any{"name": tool, "arguments": map[string]any{"msg": "x"}, "_meta": meta}
	if edit != nil {
		edit(params, meta)
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
	return string(b)
}

// eraAnswer is what a client sees of an answer: the status, and the
// messages (each JSON value re-encoded, so that key order and spacing do
// not count; other text as it came).
type eraAnswer struct {
	Status   int
	Messages string
}

// eraPost sends one POST of a 2026-07-28 client (no session) to url with
// the standard headers, then header's (an empty value removes one); host,
// when not "", is the Host it names.
func eraPost(t *testing.T, url, body string, header http.Header, host string) eraAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req := eraRequest(ctx, url, body)
	for k, vs := range header {
		req.Header.Del(k)
		for _, v := range vs {
			if v != "" {
				req.Header.Add(k, v)
			}
		}
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var data [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
				data = append(data, bytes.Clone(d))
			}
		}
	} else {
		data = [][]byte{bytes.TrimSpace(raw)}
	}
	var msgs []string
	for _, d := range data {
		var v any
		if json.Unmarshal(d, &v) == nil {
			d, _ = json.Marshal(v)
		}
		msgs = append(msgs, string(d))
	}
	return eraAnswer{Status: resp.StatusCode, Messages: strings.Join(msgs, "\n")}
}

// eraRequest is a 2026-07-28 client's tools/call POST (no session) of
// body to url, with the standard headers.
func eraRequest(ctx context.Context, url, body string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(protocolVersionHeader, modernProtocol)
	req.Header.Set(methodHeader, methodCallTool)
	var call struct {
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	_ = json.Unmarshal([]byte(body), &call)
	req.Header.Set(nameHeader, call.Params.Name)
	return req
}

// TestEraFastPathAsTheGoSDK sends 2026-07-28 tools/calls by hand, each to
// a gateway with the fast path and to one without, and requires the same
// status and messages, and the fast path taken exactly where it should:
// what the go-sdk's stateless handler checks of such a request (the
// standard headers, _meta) is checked alike, a request that fails them
// is left to the go-sdk, which answers it, and an error keeps the era's
// HTTP status.
func TestEraFastPathAsTheGoSDK(t *testing.T) {
	set := func(k, v string) http.Header { return http.Header{k: {v}} }
	cases := []struct {
		name   string
		body   string
		header http.Header
		host   string
		taken  bool
		status int
		want   []string // in the answer
		// logs: the backend logs during the call. The go-sdk path may
		// lose its messages (its backend client can handle one after the
		// call's result, when the call no longer takes it), so only the
		// answers' last messages must agree, and want holds for the fast
		// path alone.
		logs bool
	}{
		{name: "a call", body: eraCall("a_echo", nil), taken: true, status: http.StatusOK,
			// The era requires every result's resultType (SEP-2322) and
			// its server's name in _meta (SEP-2575); the backend, of an
			// earlier protocol, sends neither.
			want: []string{`"resultType":"complete"`, `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"tether"`}},
		{name: "a backend's invalid params: 400", body: eraCall("a_badparams", nil), taken: true, status: http.StatusBadRequest},
		{name: "no clientInfo", body: eraCall("a_echo", func(_, m map[string]any) { delete(m, "io.modelcontextprotocol/clientInfo") }),
			taken: true, status: http.StatusOK},
		{name: "no Mcp-Method", body: eraCall("a_echo", nil), header: set(methodHeader, ""), status: http.StatusBadRequest},
		{name: "another Mcp-Method", body: eraCall("a_echo", nil), header: set(methodHeader, "tools/list"), status: http.StatusBadRequest},
		{name: "no Mcp-Name", body: eraCall("a_echo", nil), header: set(nameHeader, ""), status: http.StatusBadRequest},
		{name: "another Mcp-Name", body: eraCall("a_echo", nil), header: set(nameHeader, "a_fail"), status: http.StatusBadRequest},
		{name: "a version the header does not name",
			body:   eraCall("a_echo", func(_, m map[string]any) { m["io.modelcontextprotocol/protocolVersion"] = "2025-11-25" }),
			status: http.StatusBadRequest},
		{name: "no protocolVersion in _meta",
			body:   eraCall("a_echo", func(_, m map[string]any) { delete(m, "io.modelcontextprotocol/protocolVersion") }),
			status: http.StatusBadRequest},
		{name: "no _meta", body: eraCall("a_echo", func(p, _ map[string]any) { delete(p, "_meta") }), status: http.StatusBadRequest},
		{name: "no clientCapabilities",
			body:   eraCall("a_echo", func(_, m map[string]any) { delete(m, "io.modelcontextprotocol/clientCapabilities") }),
			status: http.StatusBadRequest},
		{name: "clientCapabilities not an object",
			body:   eraCall("a_echo", func(_, m map[string]any) { m["io.modelcontextprotocol/clientCapabilities"] = "all" }),
			status: http.StatusBadRequest},
		{name: "clientInfo not an object",
			body:   eraCall("a_echo", func(_, m map[string]any) { m["io.modelcontextprotocol/clientInfo"] = "raw" }),
			status: http.StatusBadRequest},
		{name: "clientInfo null",
			body:   eraCall("a_echo", func(_, m map[string]any) { m["io.modelcontextprotocol/clientInfo"] = nil }),
			status: http.StatusBadRequest},
		{name: "a logging level",
			body:  eraCall("a_echo", func(_, m map[string]any) { m["io.modelcontextprotocol/logLevel"] = "debug" }),
			taken: true, status: http.StatusOK},
		{name: "log messages at the level asked for",
			body:  eraCall("a_logs", func(_, m map[string]any) { m["io.modelcontextprotocol/logLevel"] = "warning" }),
			taken: true, status: http.StatusOK, logs: true,
			want: []string{`"method":"notifications/message","params":{"data":"loud","level":"warning","logger":"a"}`}},
		{name: "a logging level of no such name",
			body:   eraCall("a_echo", func(_, m map[string]any) { m["io.modelcontextprotocol/logLevel"] = "chatty" }),
			status: http.StatusOK},
		{name: "a capability spelled in another case",
			body: eraCall("a_echo", func(_, m map[string]any) {
				m["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"Sampling": map[string]any{}}
			}),
			status: http.StatusOK},
		{name: "a round's answer names no call",
			body:  eraCall("a_echo", func(p, _ map[string]any) { p["requestState"] = roundStatePrefix + "0" }),
			taken: true, status: http.StatusOK, want: []string{"names no call in flight"}},
		{name: "a round's answers name no call",
			body: eraCall("a_echo", func(p, _ map[string]any) {
				p["requestState"] = roundStatePrefix + "0"
				p["inputResponses"] = map[string]any{"r1": map[string]any{"roots": []any{}}}
			}),
			taken: true, status: http.StatusOK, want: []string{"names no call in flight"}},
		{name: "a requestState spelled in another case",
			body:  eraCall("a_echo", func(p, _ map[string]any) { p["RequestState"] = roundStatePrefix + "0" }),
			taken: true, status: http.StatusOK, want: []string{`a:{\"msg\":\"x\"}`}},
		{name: "a requestState of the backend's",
			body:   eraCall("a_echo", func(p, _ map[string]any) { p["requestState"] = "backend-state" }),
			status: http.StatusOK},
		{name: "answers without a requestState",
			body: eraCall("a_echo", func(p, _ map[string]any) {
				p["inputResponses"] = map[string]any{"r1": map[string]any{"roots": []any{}}}
			}),
			status: http.StatusOK},
		{name: "answers of no kind the go-sdk knows",
			body: eraCall("a_echo", func(p, _ map[string]any) {
				p["requestState"] = roundStatePrefix + "0"
				p["inputResponses"] = map[string]any{"r1": map[string]any{"what": 1}}
			}),
			status: http.StatusBadRequest},
		{name: "a requestState that is no string",
			body:   eraCall("a_echo", func(p, _ map[string]any) { p["requestState"] = 7 }),
			status: http.StatusBadRequest},
		{name: "a version the gateway does not serve", body: eraCall("a_echo", nil),
			header: set(protocolVersionHeader, "2099-01-01"), status: http.StatusBadRequest},
		{name: "a foreign Host", body: eraCall("a_echo", nil), host: "evil.example", status: http.StatusForbidden},
		{name: "a tool that binds headers, without them",
			body:   eraCall("a_region", func(p, _ map[string]any) { p["arguments"] = map[string]any{"region": "eu"} }),
			status: http.StatusBadRequest},
		{name: "a tool that binds headers, with them",
			body:   eraCall("a_region", func(p, _ map[string]any) { p["arguments"] = map[string]any{"region": "eu"} }),
			header: set("Mcp-Param-Region", "eu"), status: http.StatusOK},
		{name: "Accept without event streams", body: eraCall("a_echo", nil), header: set("Accept", "application/json"), status: http.StatusBadRequest},
		{name: "Accept */*", body: eraCall("a_echo", nil), header: set("Accept", "*/*"), taken: true, status: http.StatusOK},
		{name: "Content-Type not JSON", body: eraCall("a_echo", nil), header: set("Content-Type", "text/plain"), status: http.StatusUnsupportedMediaType},
		{name: "a body over the limit (4 MiB)",
			body:   eraCall("a_echo", func(p, _ map[string]any) { p["arguments"] = map[string]any{"msg": strings.Repeat("x", 4<<20)} }),
			status: http.StatusRequestEntityTooLarge},
		{name: "a batch", body: "[" + eraCall("a_echo", nil) + "]", status: http.StatusBadRequest},
		{name: "arguments nested past the go-sdk's depth limit (1000)",
			body: eraCall("a_echo", func(p, _ map[string]any) {
				p["arguments"] = map[string]any{"deep": json.RawMessage(strings.Repeat("[", 1000) + strings.Repeat("]", 1000))}
			}),
			status: http.StatusBadRequest},
		{name: "arguments nested to the go-sdk's depth limit",
			body: eraCall("a_echo", func(p, _ map[string]any) {
				p["arguments"] = map[string]any{"deep": json.RawMessage(strings.Repeat("[", 997) + strings.Repeat("]", 997))}
			}),
			taken: true, status: http.StatusOK},
		{name: "an unknown tool", body: eraCall("a_nope", nil), status: http.StatusBadRequest},
	}
	fixtures := [2]*fastFixture{newFastFixture(t, false, 0), newFastFixture(t, true, 0)}
	for _, f := range fixtures {
		// A classic client wants every log message: the backends send
		// them all, and a call's own messages are those of its level.
		c := rawSession(t, f.g, f.url, "")
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		status, msgs := c.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`)
		cancel()
		if status != http.StatusOK {
			t.Fatalf("logging/setLevel: %d %s", status, msgs)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]eraAnswer
			for i, f := range fixtures {
				before := f.g.fastCalls.Load()
				got[i] = eraPost(t, f.url, tc.body, tc.header, tc.host)
				if taken := f.g.fastCalls.Load() > before; taken != (i == 1 && tc.taken) {
					t.Errorf("fast path on=%v: taken %v, want %v", i == 1, taken, i == 1 && tc.taken)
				}
			}
			if got[0].Status != tc.status {
				t.Errorf("the go-sdk answered %d, want %d: %s", got[0].Status, tc.status, got[0].Messages)
			}
			for _, w := range tc.want {
				for i, a := range got {
					if tc.logs && i == 0 {
						continue
					}
					if !strings.Contains(a.Messages, w) {
						t.Errorf("fast path on=%v: the answer %s lacks %s", i == 1, a.Messages, w)
					}
				}
			}
			if tc.logs {
				if strings.Contains(got[1].Messages, "quiet") {
					t.Errorf("a debug message reached a call at warning: %s", got[1].Messages)
				}
				for i := range got {
					got[i].Messages = got[i].Messages[strings.LastIndex(got[i].Messages, "\n")+1:]
				}
			}
			if got[0] != got[1] {
				t.Errorf("answers differ:\n go-sdk: %+v\n   fast: %+v", got[0], got[1])
			}
		})
	}
}

// TestEraFastCallAsksBackendsForItsLevel: a 2026-07-28 call on the fast
// path that names a logging level, where no client asked for one before,
// has the backends asked for it first (as interceptSetLevel does on the
// go-sdk path), so its own log messages come; and the gateway forgets the
// call's level once it is answered.
func TestEraFastCallAsksBackendsForItsLevel(t *testing.T) {
	f := newFastFixture(t, true, 0)
	got := eraPost(t, f.url, eraCall("a_logs", func(_, m map[string]any) { m["io.modelcontextprotocol/logLevel"] = "warning" }), nil, "")
	if f.g.fastCalls.Load() != 1 {
		t.Fatalf("fast calls %d, want 1", f.g.fastCalls.Load())
	}
	if !strings.Contains(got.Messages, `"data":"loud"`) || strings.Contains(got.Messages, "quiet") {
		t.Errorf("answer %+v: want the warning and not the debug message", got)
	}
	f.g.levels.mu.Lock()
	left, sent := len(f.g.levels.m), f.g.levels.sent
	f.g.levels.mu.Unlock()
	if left != 0 || sent != "warning" {
		t.Errorf("levels after the call: %d clients, backends at %q; want none, at warning", left, sent)
	}
}

// TestFastWriterNothingAfterTheAnswer: a fast call in rounds runs on after
// its question went out as the answer; its later progress and log
// messages must not reach the response, in either framing.
func TestFastWriterNothingAfterTheAnswer(t *testing.T) {
	for _, sse := range []bool{false, true} {
		rec := httptest.NewRecorder()
		f := &fastWriter{w: rec, id: json.RawMessage(`7`), token: json.RawMessage(`"t"`), era: true}
		if sse {
			f.progress(&mcp.ProgressNotificationParams{Progress: 1})
		}
		f.result(json.RawMessage(`{"content":[]}`))
		answer := rec.Body.String()
		f.progress(&mcp.ProgressNotificationParams{Progress: 2})
		f.notify("notifications/message", &mcp.LoggingMessageParams{Level: "error", Data: "late"})
		if got := rec.Body.String(); got != answer {
			t.Errorf("sse=%v: the response went on after its answer:\n%s", sse, got)
		}
	}
}

// TestEraFastPathBehindTheToken: with --auth-token-file a 2026-07-28 call
// reaches the fast path only with the token; without it, it is refused
// before either path sees it.
func TestEraFastPathBehindTheToken(t *testing.T) {
	f := newFastFixture(t, true, 0)
	const token = "era-token-0123456789abcdef"
	url, _ := serveOn(t, f.g, "127.0.0.1:0", writeToken(t, token))
	if got := eraPost(t, url, eraCall("a_echo", nil), nil, ""); got.Status != http.StatusUnauthorized || f.g.fastCalls.Load() != 0 {
		t.Errorf("without the token: %+v, fast calls %d; want 401 and none", got, f.g.fastCalls.Load())
	}
	got := eraPost(t, url, eraCall("a_echo", nil), http.Header{"Authorization": {"Bearer " + token}}, "")
	if got.Status != http.StatusOK || !strings.Contains(got.Messages, `a:{\"msg\":\"x\"}`) || f.g.fastCalls.Load() != 1 {
		t.Errorf("with the token: %+v, fast calls %d; want the answer on the fast path", got, f.g.fastCalls.Load())
	}
	if strings.Contains(got.Messages, token) {
		t.Errorf("the token reached the answer: %s", got.Messages)
	}
}

// TestEraFastCallSettlesTheNames: a 2026-07-28 client may call a tool
// with no request before it (it knows the name from an earlier run), and
// from that call on the names it may use are kept by whoever serves them
// (settle), on either path: a connection that comes up later with the
// same name must not take it over because the call went the fast way.
func TestEraFastCallSettlesTheNames(t *testing.T) {
	for _, fast := range []bool{false, true} {
		f := newFastFixture(t, fast, 0)
		if f.g.settled.Load() {
			t.Fatalf("fast=%v: the gateway settled before any client came", fast)
		}
		if got := eraPost(t, f.url, eraCall("a_echo", nil), nil, ""); got.Status != http.StatusOK {
			t.Fatalf("fast=%v: %+v", fast, got)
		}
		if taken := f.g.fastCalls.Load() == 1; taken != fast {
			t.Errorf("fast=%v: fast path taken %v", fast, taken)
		}
		if !f.g.settled.Load() {
			t.Errorf("fast=%v: a client called a tool and the gateway did not settle its names", fast)
		}
	}
}

// TestRoundStateCannotBeGuessed: a requestState names a call in flight,
// and whoever presents it answers the backend's question and gets the
// call's result: another client must not be able to name it from the
// states it was given itself.
func TestRoundStateCannotBeGuessed(t *testing.T) {
	f := newFastFixture(t, true, 0)
	var states []string
	for range 2 {
		got := eraPost(t, f.url, eraCall("a_roots", nil), nil, "")
		var msg struct {
			Result struct {
				RequestState  string                     `json:"requestState"`
				InputRequests map[string]json.RawMessage `json:"inputRequests"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(got.Messages[strings.LastIndex(got.Messages, "\n")+1:]), &msg); err != nil || len(msg.Result.InputRequests) != 1 {
			t.Fatalf("want a round's question: %+v", got)
		}
		state := msg.Result.RequestState
		states = append(states, state)
		// Answer it, so that the backend call ends.
		for id := range msg.Result.InputRequests {
			got = eraPost(t, f.url, eraCall("a_roots", func(p, _ map[string]any) {
				p["requestState"] = state
				p["inputResponses"] = map[string]any{id: map[string]any{"roots": []any{}}}
			}), nil, "")
		}
		if got.Status != http.StatusOK || !strings.Contains(got.Messages, `roots: []`) {
			t.Fatalf("the round's answer: %+v", got)
		}
	}
	for _, s := range states {
		secret, ok := strings.CutPrefix(s, roundStatePrefix)
		if !ok || len(secret) < 26 || strings.Trim(secret, "0123456789") == "" {
			t.Errorf("requestState %q: want the gateway's prefix and 128 random bits after it", s)
		}
	}
}

// TestEraFastCallInFlightAnsweredAtShutdown: at shutdown a 2026-07-28
// call in flight on the fast path, whose backend call runs in rounds
// beside the client's request, gets its answer (the error of its backend's
// end, as the controller closes every backend on the same signal) before
// the gateway stops. It has no session for the shutdown to end, so the
// drain of the POSTs in flight (g.posts) is not what keeps it: nothing but
// its backend's end may end it while net/http's Shutdown waits for its
// connection.
func TestEraFastCallInFlightAnsweredAtShutdown(t *testing.T) {
	f := newFastFixture(t, true, time.Minute)
	g := New(Options{Logger: testLogger(t), ShutdownTimeout: 30 * time.Second})
	g.Set(Connection{Name: "a", Prefix: "a", Backend: f.sess, CallTimeout: time.Minute})
	url, stop := serveOn(t, g, "127.0.0.1:0", "")
	answered := make(chan eraAnswer, 1)
	go func() { answered <- eraPost(t, url, eraCall("a_hold", nil), nil, "") }()
	select {
	case <-f.tb.entered:
	case <-time.After(waitTimeout):
		t.Fatal("the call never reached the backend")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	addr := strings.TrimPrefix(strings.TrimSuffix(url, Path), "http://")
	waitFor(t, "shutdown to begin (the listener closed)", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	_ = f.sess.Close() // what the controller does with every backend
	select {
	case a := <-answered:
		if a.Status != http.StatusOK || !strings.Contains(a.Messages, `"error"`) || !strings.Contains(a.Messages, `"id":7`) {
			t.Errorf("the call in flight at shutdown was answered %d %s, want its JSON-RPC error", a.Status, a.Messages)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the call in flight at shutdown got no answer")
	}
	if n := g.fastCalls.Load(); n != 1 {
		t.Errorf("%d calls on the fast path, want 1", n)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve returned %v", err)
	}
}
