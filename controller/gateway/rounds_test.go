package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
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
	question := roundQuestion
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
	third, thirdID := question(eraPost(t, f.url, eraCall("a_rounds", nil), nil, ""))
	if third == "" {
		t.Fatal("a call after the parked one's round was not asked: its place was not given back")
	}

	// A round whose answer the backend takes and then works on (until
	// the gate opens): the call is no longer parked (a request serves it
	// again), though it goes on.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url, strings.NewReader(eraCall("a_rounds", func(p, _ map[string]any) {
		p["requestState"] = third
		p["inputResponses"] = map[string]any{thirdID: map[string]any{"roots": []any{}}}
	})))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(protocolVersionHeader, modernProtocol)
	req.Header.Set(methodHeader, methodCallTool)
	req.Header.Set(nameHeader, "a_rounds")
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
	f.gate <- struct{}{}
	<-resumed
}

// roundQuestion is the requestState and the id of the one question of a
// 2026-07-28 answer that asks its client something ("" when it asks
// nothing).
func roundQuestion(got eraAnswer) (state, id string) {
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

// eraStream sends one POST of a 2026-07-28 client, as eraPost does, and
// hands each message of its answer's event stream to seen as it comes,
// re-encoded as eraPost does; it returns the status.
func eraStream(t *testing.T, url, body string, seen func(msg string)) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	resp, err := http.DefaultClient.Do(eraRequest(ctx, url, body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("answer of type %q, want an event stream: %d %s", ct, resp.StatusCode, raw)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
			var v any
			if json.Unmarshal(d, &v) == nil {
				d, _ = json.Marshal(v)
			}
			seen(string(d))
		}
	}
	if err := sc.Err(); err != nil {
		t.Errorf("reading the answer: %v", err)
	}
	return resp.StatusCode
}

// TestLaterRoundsTakeOneRoad: a 2026-07-28 client's later round of a call
// in rounds (its tools/call carrying the gateway's requestState and the
// answers) takes the road its first round takes: the fast path where the
// request passes the fast path's checks, the go-sdk path where the fast
// path is off, with the same answer. And whichever road, what the
// backend sends while that later round waits reaches it: its log
// messages at the round's level, and its progress under the round's own
// progressToken (not the first round's), in order, before the round's
// answer.
func TestLaterRoundsTakeOneRoad(t *testing.T) {
	var results [2]string
	for i, fast := range []bool{false, true} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) { results[i] = laterRound(t, fast) })
	}
	if results[0] != results[1] {
		t.Errorf("the later round's answers differ:\n go-sdk: %s\n   fast: %s", results[0], results[1])
	}
}

// laterRound runs TestLaterRoundsTakeOneRoad on one road and returns the
// later round's answer.
func laterRound(t *testing.T, fast bool) string {
	// onFast is how many of a round's calls the fast path carries.
	onFast := int64(0)
	if fast {
		onFast = 1
	}
	f := newFastFixture(t, fast, 0)
	level := func(m map[string]any) { m["io.modelcontextprotocol/logLevel"] = "warning" }
	state, id := roundQuestion(eraPost(t, f.url, eraCall("a_rounds", func(_, m map[string]any) {
		m["progressToken"] = "t1"
		level(m)
	}), nil, ""))
	if state == "" {
		t.Fatalf("fast=%v: the first round was not asked the backend's question", fast)
	}
	if n := f.g.fastCalls.Load(); n != onFast {
		t.Fatalf("fast=%v: the first round: %d calls on the fast path", fast, n)
	}
	var msgs []string
	released := false
	type progress struct {
		Params struct {
			ProgressToken any     `json:"progressToken"`
			Progress      float64 `json:"progress"`
		} `json:"params"`
	}
	status := eraStream(t, f.url, eraCall("a_rounds", func(p, m map[string]any) {
		p["requestState"] = state
		p["inputResponses"] = map[string]any{id: map[string]any{"roots": []any{}}}
		m["progressToken"] = "t2"
		level(m)
	}), func(msg string) {
		msgs = append(msgs, msg)
		if released {
			return
		}
		logged, progressed := false, false
		for _, m := range msgs {
			logged = logged || strings.Contains(m, `"data":"after roots"`)
			progressed = progressed || strings.Contains(m, `"message":"two"`)
		}
		if logged && progressed {
			// Both came while the round waits: the backend may end
			// the call.
			released = true
			f.gate <- struct{}{}
		}
	})
	if !released {
		t.Fatalf("fast=%v: the later round did not get the backend's log message and progress while it waited: %d %q", fast, status, msgs)
	}
	if n, want := f.g.fastCalls.Load(), 2*onFast; n != want {
		t.Errorf("fast=%v: %d calls on the fast path after the later round, want %d", fast, n, want)
	}
	var seen []float64
	for j, m := range msgs {
		if !strings.Contains(m, `"notifications/progress"`) {
			if strings.Contains(m, `"result"`) && j != len(msgs)-1 {
				t.Errorf("fast=%v: messages after the round's answer: %q", fast, msgs[j+1:])
			}
			continue
		}
		var p progress
		_ = json.Unmarshal([]byte(m), &p)
		if p.Params.ProgressToken != "t2" {
			t.Errorf("fast=%v: progress of the later round under token %v, want its own (t2): %s", fast, p.Params.ProgressToken, m)
		}
		seen = append(seen, p.Params.Progress)
	}
	if !slices.Equal(seen, []float64{2, 3}) {
		t.Errorf("fast=%v: the later round's progress %v, want [2 3] in order: %q", fast, seen, msgs)
	}
	result := msgs[len(msgs)-1]
	if !strings.Contains(result, "rounds done") || !strings.Contains(result, `"resultType":"complete"`) {
		t.Errorf("fast=%v: the later round's answer %s, want the call's result", fast, result)
	}
	f.g.rounds.mu.Lock()
	parked := f.g.rounds.parked
	f.g.rounds.mu.Unlock()
	if parked != 0 {
		t.Errorf("fast=%v: %d calls still parked after the last round", fast, parked)
	}
	return result
}

// TestRoundsAcrossRoads: each round of a 2026-07-28 call takes the road
// its own request qualifies for, so a call one road began may be resumed
// on the other (the fast path turned on or off between rounds stands for
// a request that passes or fails its checks); the client's answer is the
// same as when both rounds take one road.
func TestRoundsAcrossRoads(t *testing.T) {
	answers := map[string]string{}
	for _, roads := range [][2]bool{{false, false}, {true, true}, {false, true}, {true, false}} {
		f := newFastFixture(t, roads[0], 0)
		state, id := roundQuestion(eraPost(t, f.url, eraCall("a_roots", nil), nil, ""))
		if state == "" {
			t.Fatalf("%v: the first round was not asked", roads)
		}
		f.g.noFastPath.Store(!roads[1])
		before := f.g.fastCalls.Load()
		got := eraPost(t, f.url, eraCall("a_roots", func(p, _ map[string]any) {
			p["requestState"] = state
			p["inputResponses"] = map[string]any{id: map[string]any{"roots": []any{}}}
		}), nil, "")
		if taken := f.g.fastCalls.Load() > before; taken != roads[1] {
			t.Errorf("%v: the second round on the fast path: %v", roads, taken)
		}
		if got.Status != http.StatusOK || !strings.Contains(got.Messages, "roots: []") {
			t.Errorf("%v: the second round's answer %+v, want the call's result", roads, got)
		}
		answers[fmt.Sprint(roads)] = got.Messages
	}
	for roads, got := range answers {
		if want := answers["[false false]"]; got != want {
			t.Errorf("%s: the answer differs from the go-sdk road's:\n got: %s\nwant: %s", roads, got, want)
		}
	}
}

// TestRoundLeavesAQuestionUnanswered: a later round whose answers miss the
// question it was asked (none, or another id) spends its requestState, and
// the backend waits on for the answer: the round is asked that question
// again under a new state at once, on either road, rather than left
// waiting for callTimeout; answering it then ends the call.
func TestRoundLeavesAQuestionUnanswered(t *testing.T) {
	for _, fast := range []bool{false, true} {
		// A callTimeout past the client's own wait: a round left to it
		// fails the test.
		f := newFastFixture(t, fast, 3*waitTimeout)
		state, id := roundQuestion(eraPost(t, f.url, eraCall("a_roots", nil), nil, ""))
		if state == "" {
			t.Fatalf("fast=%v: the first round was not asked", fast)
		}
		for _, answers := range []map[string]any{{}, {id + "x": map[string]any{"roots": []any{}}}} {
			before := f.g.fastCalls.Load()
			got := eraPost(t, f.url, eraCall("a_roots", func(p, _ map[string]any) {
				p["requestState"] = state
				p["inputResponses"] = answers
			}), nil, "")
			if taken := f.g.fastCalls.Load() > before; taken != fast {
				t.Errorf("fast=%v: the round on the fast path: %v", fast, taken)
			}
			again, againID := roundQuestion(got)
			if again == "" || again == state || againID != id || !strings.Contains(got.Messages, `"method":"roots/list"`) {
				t.Fatalf("fast=%v: answers %v: the round's answer %+v, want the question %s asked again under a new state", fast, answers, got, id)
			}
			state = again
		}
		got := eraPost(t, f.url, eraCall("a_roots", func(p, _ map[string]any) {
			p["requestState"] = state
			p["inputResponses"] = map[string]any{id: map[string]any{"roots": []any{}}}
		}), nil, "")
		if got.Status != http.StatusOK || !strings.Contains(got.Messages, "roots: []") {
			t.Errorf("fast=%v: the last round's answer %+v, want the call's result", fast, got)
		}
		f.g.rounds.mu.Lock()
		parked := f.g.rounds.parked
		f.g.rounds.mu.Unlock()
		if parked != 0 {
			t.Errorf("fast=%v: %d calls still parked after the last round", fast, parked)
		}
	}
}

// TestRoundsAskedAgainHoldNothing: a client that keeps coming back without
// the answer is asked again each time, and that costs the gateway nothing
// that grows with its rounds: one valid state for the call, no goroutine
// per round.
func TestRoundsAskedAgainHoldNothing(t *testing.T) {
	f := newFastFixture(t, true, 0)
	state, _ := roundQuestion(eraPost(t, f.url, eraCall("a_roots", nil), nil, ""))
	round := func() {
		t.Helper()
		got := eraPost(t, f.url, eraCall("a_roots", func(p, _ map[string]any) {
			p["requestState"] = state
			p["inputResponses"] = map[string]any{}
		}), nil, "")
		if state, _ = roundQuestion(got); state == "" {
			t.Fatalf("a round without the answer: %+v, want the question again", got)
		}
	}
	round() // the client's connection is up
	before := runtime.NumGoroutine()
	const rounds = 200
	for range rounds {
		round()
	}
	if grew := runtime.NumGoroutine() - before; grew >= rounds/4 {
		t.Errorf("%d rounds left %d goroutines more", rounds, grew)
	}
	f.g.rounds.mu.Lock()
	states, parked := len(f.g.rounds.m), f.g.rounds.parked
	f.g.rounds.mu.Unlock()
	if states != 1 || parked != 1 {
		t.Errorf("after %d rounds: %d states, %d calls parked; want 1 and 1", rounds, states, parked)
	}
}

// TestBetweenRoundsReachTheNextRound: what a backend sends on its call's
// own stream while its question waits for the client's next round is read
// once that round's answer reaches it, and so reaches that round, before
// its answer (docs/contract.md), when the fast path made the call. (When
// the go-sdk did, its client hands notifications to a goroutine of their
// own: such a message reaches the next round or, handled before that
// round came, no one.)
func TestBetweenRoundsReachTheNextRound(t *testing.T) {
	f := newFastFixture(t, true, 0)
	level := func(m map[string]any) { m["io.modelcontextprotocol/logLevel"] = "warning" }
	state, id := roundQuestion(eraPost(t, f.url, eraCall("a_between", func(_, m map[string]any) { level(m) }), nil, ""))
	if state == "" {
		t.Fatal("the first round was not asked")
	}
	f.gate <- struct{}{}
	<-f.between // the backend sent it while its question waited
	got := eraPost(t, f.url, eraCall("a_between", func(p, m map[string]any) {
		level(m)
		p["requestState"] = state
		p["inputResponses"] = map[string]any{id: map[string]any{"roots": []any{}}}
	}), nil, "")
	msgs := strings.Split(got.Messages, "\n")
	if len(msgs) != 2 || !strings.Contains(msgs[0], `"data":"between rounds"`) || !strings.Contains(msgs[1], "answered") {
		t.Errorf("the next round's answer %+v, want the message sent between rounds, then the result", got)
	}
}

// TestProgressBeforeTheQuestion: progress a backend reports before it asks
// its client something reaches the round waiting then, before the question
// that is that round's answer (after it, the round takes nothing more),
// whichever path made the call: on the fast path the question comes on the
// call's stream, on the go-sdk path (every call to a 2026-07-28 backend,
// and to a stdio one) through the go-sdk's handlers.
func TestProgressBeforeTheQuestion(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) { progressBeforeTheQuestion(t, fast) })
	}
}

func progressBeforeTheQuestion(t *testing.T, fast bool) {
	f := newFastFixture(t, fast, 0)
	for i := range 20 {
		got := eraPost(t, f.url, eraCall("a_progask", func(_, m map[string]any) { m["progressToken"] = "t1" }), nil, "")
		state, id := roundQuestion(got)
		if state == "" {
			t.Fatalf("call %d was not asked: %+v", i, got)
		}
		if msgs := strings.Split(got.Messages, "\n"); len(msgs) != 2 || !strings.Contains(msgs[0], `"message":"before the question"`) {
			t.Errorf("call %d: the round's answer %+v, want the progress, then the question", i, got)
		}
		got = eraPost(t, f.url, eraCall("a_progask", func(p, _ map[string]any) {
			p["requestState"] = state
			p["inputResponses"] = map[string]any{id: map[string]any{"roots": []any{}}}
		}), nil, "")
		if !strings.Contains(got.Messages, "asked") {
			t.Fatalf("call %d: the last round's answer %+v", i, got)
		}
	}
}
