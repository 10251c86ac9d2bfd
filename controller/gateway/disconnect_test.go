package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// disconnectBound is the callTimeout of the disconnect tests' calls. A
// call endWithPOST fails to end (a regression) ends at it: the test then
// fails with its own message (waitDisconnectEnded) instead of hanging in
// its cleanups, whose session closes wait for the call, until the
// package's timeout.
const disconnectBound = 2 * waitTimeout

// waitDisconnectEnded waits, at most waitTimeout, for the backend to see
// its call cancelled after the call's client went away.
func waitDisconnectEnded(t *testing.T, tb *testBackend) {
	t.Helper()
	waitEndedOr(t, tb, fmt.Sprintf("the backend did not see the call cancelled within %v of its client's going away: endWithPOST did not end it (the call ends at its callTimeout, %v)", waitTimeout, disconnectBound))
}

// TestSDKPathClientDisconnect: a client of a classic session that goes
// away mid-call, without notifications/cancelled, ends a call the go-sdk
// carries (endWithPOST): the backend sees the call cancelled and the
// gateway records it canceled; for one call, for each call of a batch,
// and for a call the go-sdk dispatches only after its POST ended. The
// backend's go-sdk server ends its handler only on
// notifications/cancelled, so its end proves the gateway sent one.
func TestSDKPathClientDisconnect(t *testing.T) {
	for _, tc := range []struct {
		name, version, body string
		calls               int
	}{
		{"one call", "", `{"jsonrpc":"2.0","id":"d-1","method":"tools/call","params":{"name":"a_block"}}`, 1},
		// Batches are of the protocol before 2025-06-18.
		{"batch", "2025-03-26", `[{"jsonrpc":"2.0","id":"d-1","method":"tools/call","params":{"name":"a_block"}},` +
			`{"jsonrpc":"2.0","id":"d-2","method":"tools/call","params":{"name":"a_block"}}]`, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFastFixture(t, false, disconnectBound)
			c := rawSession(t, f.g, f.url, tc.version)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			go func() { defer close(done); c.post(ctx, tc.body) }()
			for range tc.calls {
				select {
				case <-f.tb.entered:
				case <-time.After(waitTimeout):
					t.Fatal("the backend never saw the call")
				}
			}
			cancel()
			<-done
			for range tc.calls {
				waitDisconnectEnded(t, f.tb)
			}
			waitFor(t, "every call recorded canceled", func() bool { return f.obs.count("a/canceled") == tc.calls })
			if n := f.g.fastCalls.Load(); n != 0 {
				t.Errorf("%d calls took the fast path, want the go-sdk's", n)
			}
		})
	}

	t.Run("gone before dispatch", func(t *testing.T) {
		f := newFastFixture(t, false, disconnectBound)
		// Hold the call, outside every middleware of the gateway's, until
		// its POST has ended: the go-sdk dispatches it late.
		posted := make(chan struct{})
		f.g.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == methodCallTool {
					<-posted
				}
				return next(ctx, method, req)
			}
		})
		c := rawSession(t, f.g, f.url, "")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.post(ctx, `{"jsonrpc":"2.0","id":"late","method":"tools/call","params":{"name":"a_block"}}`)
		}()
		waitFor(t, "the call's POST is open", func() bool { return f.g.notices.open() == 1 })
		cancel()
		<-done
		waitFor(t, "the call's POST ended", func() bool { return f.g.notices.open() == 0 })
		close(posted)
		// The backend may see the call, cancelled at once, or not at all.
		waitFor(t, "the call recorded canceled", func() bool { return f.obs.count("a/canceled") == 1 })
		select {
		case <-f.tb.entered:
			waitDisconnectEnded(t, f.tb)
		default:
		}
	})
}

// TestSDKPathRequestRunsOnWhileItsPOSTLives: endWithPOST ends no request
// whose POST is still there. The go-sdk holds a POST until every call it
// carries is answered: a call of a batch (2025-03-26) answered after the
// other one runs on to its own answer. (A relay's answer comes on a POST
// of its own, answered 202 before the go-sdk hands it on, and ends
// nothing: the go-sdk path's "roots relayed" of TestFastPathSameAnswers.)
func TestSDKPathRequestRunsOnWhileItsPOSTLives(t *testing.T) {
	f := newFastFixture(t, false, 0)
	c := rawSession(t, f.g, f.url, "2025-03-26")
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(
		`[{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"a_echo","arguments":{"msg":"first"}}},`+
			`{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"a_progress"}}]`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(sessionIDHeader, c.sid)
	req.Header.Set(protocolVersionHeader, c.version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msgs []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		msgs = append(msgs, data)
		if strings.Contains(data, `"id":"e"`) {
			close(f.tb.release) // the second call answers only now
		}
	}
	all := strings.Join(msgs, "\n")
	if len(msgs) != 2 || !strings.Contains(all, `a:{\"msg\":\"first\"}`) || !strings.Contains(all, `"id":"p"`) || !strings.Contains(all, `"text":"done"`) {
		t.Fatalf("the batch's answers: %s", all)
	}
	if n := f.obs.count("a/canceled"); n != 0 {
		t.Errorf("%d calls recorded canceled, want none", n)
	}
}

// TestFirstListWaitEndsWithItsPOST: a list waiting for the first outcomes
// (firstanswer.go) is freed when its client goes away without
// notifications/cancelled.
func TestFirstListWaitEndsWithItsPOST(t *testing.T) {
	first := make(chan struct{})
	var release sync.Once
	defer release.Do(func() { close(first) })
	g := New(Options{Logger: testLogger(t), FirstAnswer: first, FirstAnswerTimeout: time.Hour})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	c := rawSession(t, g, url, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan string, 1)
	go func() {
		_, msgs := c.post(ctx, `{"jsonrpc":"2.0","id":"l-1","method":"tools/list"}`)
		done <- msgs
	}()
	waitFor(t, "the list waits", func() bool { return g.firstWaiting.Load() == 1 })
	cancel()
	<-done
	waitFor(t, "the wait ends with its client", func() bool { return g.firstWaiting.Load() == 0 })
	// The session is still served.
	qctx, qcancel := context.WithTimeout(context.Background(), waitTimeout)
	defer qcancel()
	release.Do(func() { close(first) })
	if _, msgs := c.post(qctx, `{"jsonrpc":"2.0","id":"l-2","method":"tools/list"}`); !strings.Contains(msgs, `"id":"l-2"`) || !strings.Contains(msgs, `"tools"`) {
		t.Errorf("a list after the one given up: %s", msgs)
	}
}

// TestEndWithPOST: a request named on a POST that ended, or whose client
// went, starts with its context ended (not from AfterFunc's goroutine, a
// moment later); one named on a POST in flight, or on none, runs on. A
// notification is handled with the context the go-sdk gave it, also when
// the POST that carried it has ended (a POST of notifications alone ends
// before they are handled).
func TestEndWithPOST(t *testing.T) {
	g := New(Options{Logger: testLogger(t)})
	var ended bool
	h := g.endWithPOST(func(ctx context.Context, _ string, _ mcp.Request) (mcp.Result, error) {
		ended = ctx.Err() != nil
		return nil, nil
	})
	// POSTs in flight: one whose client is still there, one whose client
	// went (its context ended, ServeHTTP not yet returned).
	post := func(ctx context.Context) http.Header {
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", nil)
		_, forget := g.notices.watch(httptest.NewRecorder(), r)
		t.Cleanup(forget)
		return r.Header
	}
	left, leave := context.WithCancel(context.Background())
	leave()
	live, went := post(context.Background()), post(left)
	gone := http.Header{noticesHeader: {"999"}} // no POST in flight has that name
	for _, tc := range []struct {
		method    string
		header    http.Header
		wantEnded bool
	}{
		{"notifications/initialized", gone, false},
		{"notifications/roots/list_changed", gone, false},
		{methodCallTool, gone, true},
		{"tools/list", gone, true},
		{methodCallTool, went, true},
		{methodCallTool, live, false},
		{methodCallTool, http.Header{}, false},
	} {
		req := &mcp.ServerRequest[*mcp.CallToolParamsRaw]{Params: &mcp.CallToolParamsRaw{}, Extra: &mcp.RequestExtra{Header: tc.header}}
		if _, err := h(context.Background(), tc.method, req); err != nil {
			t.Fatal(err)
		}
		if ended != tc.wantEnded {
			t.Errorf("%s with header %v: context ended %v, want %v", tc.method, tc.header, ended, tc.wantEnded)
		}
	}
}

// TestCallOfAGoneClientNotSent: a call whose client is gone before it is
// sent (its request ended by endWithPOST before dispatch) does not reach
// the backend, and ends canceled: sent, its cancellation could overtake it
// and leave it running on the backend.
func TestCallOfAGoneClientNotSent(t *testing.T) {
	g := New(Options{Logger: testLogger(t)})
	g.Set(Connection{Name: "a", Prefix: "a", Backend: offering([]string{"t"}, nil, nil, nil)})
	rt, _ := g.routes.Load().route("a_t")
	if rt.target == nil {
		t.Fatal("a_t has no route")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sent := false
	s := g.sendCall(ctx, rt, "a_t", func(context.Context, route) (bool, bool, error) {
		sent = true
		return true, false, nil
	})
	if sent {
		t.Error("the call of a client gone before it was sent reached the backend")
	}
	if !errors.Is(s.err, context.Canceled) || !errors.Is(s.callErr, context.Canceled) {
		t.Errorf("the call ended with %v (call context %v), want canceled", s.err, s.callErr)
	}
}

// TestEndWithPOSTSaysWhy: the DEBUG line of a request endWithPOST ends
// says why its POST ended: the client went away (the POST's context ended
// while it was served), or the go-sdk ended the POST first (its session
// was closed), or the POST had ended before the request was dispatched.
// It said "client disconnected" for all three.
func TestEndWithPOSTSaysWhy(t *testing.T) {
	logs := &lockedBuffer{}
	g := New(Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	entered := make(chan struct{}, 1)
	h := g.endWithPOST(func(ctx context.Context, _ string, _ mcp.Request) (mcp.Result, error) {
		entered <- struct{}{}
		<-ctx.Done()
		return nil, nil
	})
	call := func(header http.Header) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			req := &mcp.ServerRequest[*mcp.CallToolParamsRaw]{Params: &mcp.CallToolParamsRaw{}, Extra: &mcp.RequestExtra{Header: header}}
			_, _ = h(context.Background(), methodCallTool, req)
		}()
		return done
	}
	for _, tc := range []struct {
		name string
		end  func(leave context.CancelFunc, forget func()) // how the POST ends
		want string
	}{
		{"client gone", func(leave context.CancelFunc, forget func()) { leave(); forget() }, "gateway ended a request: its client disconnected"},
		{"session closed", func(leave context.CancelFunc, forget func()) { forget(); leave() }, "gateway ended a request: its session was closed"},
	} {
		ctx, leave := context.WithCancel(context.Background())
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", nil)
		_, forget := g.notices.watch(httptest.NewRecorder(), r)
		done := call(r.Header)
		// The request runs on while its POST lives; then the POST ends.
		<-entered
		tc.end(leave, forget)
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Fatalf("%s: the request was not ended", tc.name)
		}
		if !strings.Contains(logs.String(), tc.want) {
			t.Errorf("%s: the log says\n%s\nwant %q", tc.name, logs.String(), tc.want)
		}
	}
	done := call(http.Header{noticesHeader: {"999"}}) // a POST no longer in flight
	<-entered
	<-done
	if want := "gateway ended a request: its POST had ended before it was dispatched"; !strings.Contains(logs.String(), want) {
		t.Errorf("the log says\n%s\nwant %q", logs.String(), want)
	}
}

// count reports how many calls were recorded as want.
func (o *observed) count(want string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.calls {
		if c == want {
			n++
		}
	}
	return n
}

// open reports how many session POSTs are in flight.
func (s *streamNotices) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// TestClientCannotNameAPOST: the header the gateway names a session POST
// with is the gateway's own on every request, of a classic session or of
// the 2026-07-28 era (which belongs to none), served by ServeListener or
// by Handler: a client that sends it, naming a POST that ended or another
// client's, gets its call answered as any other.
func TestClientCannotNameAPOST(t *testing.T) {
	f := newFastFixture(t, false, 0)
	hs := httptest.NewServer(f.g.Handler())
	defer hs.Close()
	for route, url := range map[string]string{"ServeListener": f.url, "Handler": hs.URL} {
		c := rawSession(t, f.g, url, "")
		for _, name := range []string{"1", "999"} {
			forged := http.Header{noticesHeader: {name}}
			got := eraPost(t, url, eraCall("a_echo", nil), forged, "")
			if got.Status != http.StatusOK || !strings.Contains(got.Messages, `a:{\"msg\":\"x\"}`) {
				t.Errorf("%s: a 2026-07-28 call naming POST %s: %d %s", route, name, got.Status, got.Messages)
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(
				`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"a_echo","arguments":{"msg":"y"}}}`))
			req.Header = forged.Clone()
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set(sessionIDHeader, c.sid)
			req.Header.Set(protocolVersionHeader, c.version)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body strings.Builder
			_, _ = io.Copy(&body, resp.Body)
			resp.Body.Close()
			cancel()
			if !strings.Contains(body.String(), `a:{\"msg\":\"y\"}`) {
				t.Errorf("%s: a classic call naming POST %s: %d %s", route, name, resp.StatusCode, body.String())
			}
		}
	}
	if f.obs.count("a/canceled") != 0 || f.g.fastCalls.Load() != 0 {
		t.Errorf("calls %v, fast %d: want every call answered by the go-sdk", f.obs.calls, f.g.fastCalls.Load())
	}
}
