//go:build unix

package connection

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// busyServer is a streamable HTTP MCP server whose probes (ping,
// tools/list) wait 2 s once connected is closed, as on a server busy with
// calls. Its tool "work" answers after 20 ms; "stream" sends progress every
// 25 ms, {"steps": N} times (default 80, 2 s), and answers only then. The
// progress carries the call's token, or {"token": T} when given (a token
// no call of tether's waits on). streaming, if not nil, is closed when the
// first "stream" starts.
func busyServer(t *testing.T, connected chan struct{}, streaming chan struct{}) *httptest.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "busy", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "work", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	var started sync.Once
	srv.AddTool(&mcp.Tool{Name: "stream", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Steps int
				Token string
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			if args.Steps == 0 {
				args.Steps = 80
			}
			tok := req.Params.GetProgressToken()
			if args.Token != "" {
				tok = args.Token
			}
			if streaming != nil {
				started.Do(func() { close(streaming) })
			}
			for i := range args.Steps {
				if tok != nil {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i)})
				}
				select {
				case <-time.After(25 * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "ping" || method == "tools/list" {
				select {
				case <-connected: // after the session's own first tools/list
					select {
					case <-time.After(2 * time.Second):
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				default:
				}
			}
			return next(ctx, method, req)
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No standalone stream (a server may refuse it, 405): its ": ok"
		// comment, late on a loaded machine, would be traffic during the
		// first probe, and this server must be silent then.
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// probe probes s with the 300 ms timeout of the fault tests.
func probe(s *Session) error {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	return s.Probe(ctx)
}

// TestProbeQueuedBehindTraffic: a probe that times out while the server
// keeps answering other requests is no failure (docs/reliability.md L2);
// the same timeout with a silent server is. The server holds every probe
// for 2 s, as a server busy with calls would, while four callers keep it
// answering calls.
func TestProbeQueuedBehindTraffic(t *testing.T) {
	connected := make(chan struct{})
	s := connect(t, Request{Spec: httpSpec(busyServer(t, connected, nil).URL, "")})
	close(connected)

	if err := probe(s); err == nil {
		t.Fatal("a probe of a silent, stuck server passed")
	}

	// The probe starts once calls are answered: started before, on a
	// loaded machine it could time out before the first answer.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	answered := make(chan struct{})
	var first sync.Once
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "work"}, nil); err == nil {
					first.Do(func() { close(answered) })
				} else if ctx.Err() == nil {
					t.Errorf("a call: %v", err)
					return
				}
			}
		}()
	}
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("no call was answered")
	}
	err := probe(s)
	stop()
	wg.Wait()
	if err != nil {
		t.Errorf("a probe queued behind calls that are answered failed: %v", err)
	}
}

// TestProbeNotificationsAreNoAnswers: a server that sends notifications
// (progress for a token no call of tether's waits on, while it works on a
// call it does not answer) but answers no request while a probe waits is
// not alive (docs/reliability.md, "Hostile servers", H2).
func TestProbeNotificationsAreNoAnswers(t *testing.T) {
	connected, streaming := make(chan struct{}), make(chan struct{})
	s := connect(t, Request{Spec: httpSpec(busyServer(t, connected, streaming).URL, "")})
	close(connected)

	// The probe starts once the call streams. tether never issues the
	// token tether-0 (its tokens count from 1).
	callDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "stream", Arguments: map[string]any{"token": "tether-0"}}, nil)
		callDone <- err
	}()
	select {
	case <-streaming:
	case err := <-callDone:
		t.Fatalf("the call ended before it streamed: %v", err)
	}
	if err := probe(s); err == nil {
		t.Error("a probe passed while the server sent notifications and answered nothing")
	}
	if err := <-callDone; err != nil {
		t.Errorf("the call: %v", err)
	}
}

// TestProbeProgressOfAWaitingCallIsLife: a server that answers its probes
// only after a long call, and sends progress for that call meanwhile, is
// alive: the probes that time out behind the call pass, as many in a row
// as a failureThreshold of 3 needs (docs/reliability.md L2). Through the
// go-sdk and on the raw path.
func TestProbeProgressOfAWaitingCallIsLife(t *testing.T) {
	for _, raw := range []bool{false, true} {
		t.Run(fmt.Sprintf("raw=%v", raw), func(t *testing.T) {
			connected := make(chan struct{})
			s := connect(t, Request{Spec: httpSpec(busyServer(t, connected, nil).URL, "")})
			close(connected)

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			callDone, streaming := make(chan error, 1), make(chan struct{})
			var first sync.Once
			onProgress := func(*mcp.ProgressNotificationParams) { first.Do(func() { close(streaming) }) }
			go func() {
				var err error
				if raw {
					_, _, err = s.CallToolRaw(ctx, "stream", []RawParam{{Key: "arguments", Value: json.RawMessage(`{"steps":1200}`)}}, onProgress)
				} else {
					_, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "stream", Arguments: map[string]any{"steps": 1200}}, onProgress)
				}
				callDone <- err
			}()
			select {
			case <-streaming:
			case err := <-callDone:
				t.Fatalf("the call ended before it streamed: %v", err)
			}
			for i := range 3 {
				if err := probe(s); err != nil {
					t.Errorf("probe %d, queued behind a call that streams progress: %v", i+1, err)
				}
			}
			select {
			case err := <-callDone:
				t.Fatalf("the call ended before the probes did (%v): they did not wait behind it", err)
			default:
			}
			cancel()
			<-callDone
		})
	}
}

// TestProgressProvesLifeWhileItsCallWaits: progress counts for a token of a
// call that waits, within the call's deadline; not for an unknown token, a
// call whose ctx ended (its callTimeout) or a call that returned; and not
// once the server's last answer is older than its callTimeout.
func TestProgressProvesLifeWhileItsCallWaits(t *testing.T) {
	s := &Session{red: newRedactor(nil, nil)}
	s.seen.window = time.Hour
	s.seen.answered() // as Connect's answers do
	sent := func(token string) bool {
		start := time.Now()
		for !time.Now().After(start) { // a clock step past start
		}
		s.routeProgress(&mcp.ProgressNotificationParams{ProgressToken: token, Progress: 1})
		return s.seen.since(start)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, token, done := s.trackProgress(ctx, func(*mcp.ProgressNotificationParams) {})
	if !sent(token) {
		t.Error("progress for a waiting call proved nothing")
	}
	s.seen.window = time.Nanosecond // the last answer is older than that
	if sent(token) {
		t.Error("progress for a waiting call proved life though the server answered nothing for longer than its callTimeout")
	}
	s.seen.window = time.Hour
	if sent("tether-0") {
		t.Error("progress for a token nobody waits on proved life")
	}
	cancel()
	if sent(token) {
		t.Error("progress for a call past its deadline proved life")
	}
	done(false)
	if sent(token) {
		t.Error("progress for a call that returned proved life")
	}
}

// TestProbeProgressWithoutAnswersIsNoLife: a server that answers nothing,
// not its probes and not its calls, but sends progress for every call
// tether waits on, while calls keep coming, goes down once its last answer
// is older than its callTimeout: probe after probe fails although progress
// of a waiting call arrives during each (docs/reliability.md, "Hostile
// servers", H2). Progress alone would keep it up for ever: each call's
// progress counts until that call's deadline, and the next call is there.
func TestProbeProgressWithoutAnswersIsNoLife(t *testing.T) {
	const callTimeout = 500 * time.Millisecond
	// gone ends the handlers when the test does: a request whose client
	// gave up may never see its ctx end, and hs.Close waits for them.
	connected, gone := make(chan struct{}), make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "hung", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "hang", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i := 1; ; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i)})
				select {
				case <-time.After(25 * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-gone:
					return nil, context.Canceled
				}
			}
		})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			select {
			case <-connected: // after the session's own first tools/list
				if method == "ping" || method == "tools/list" {
					select { // answers no probe
					case <-ctx.Done():
					case <-gone:
					}
					return nil, context.Canceled
				}
			default:
			}
			return next(ctx, method, req)
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet { // no standalone stream: no traffic but progress
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(gone) }) // before hs.Close
	sp := httpSpec(hs.URL, "")
	sp.CallTimeout = &spec.Duration{Duration: callTimeout}
	s := connect(t, Request{Spec: sp})
	close(connected)

	// Calls keep coming, each bounded by the callTimeout as the gateway
	// bounds them; none is answered.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var progress atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				callCtx, cancel := context.WithTimeout(ctx, callTimeout)
				_, err := s.CallTool(callCtx, &mcp.CallToolParams{Name: "hang"}, func(*mcp.ProgressNotificationParams) { progress.Add(1) })
				cancel()
				if err == nil {
					t.Error("the hung server answered a call")
				}
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()

	// Each probe that fails while progress arrives counts; one that
	// passes starts the count over. Early probes may pass: Connect's
	// answers are recent then.
	failed := 0
	for i := 0; i < 40 && failed < 3; i++ {
		before := progress.Load()
		err := probe(s)
		switch {
		case err == nil:
			failed = 0
		case progress.Load() > before:
			failed++
		}
	}
	if failed < 3 {
		t.Errorf("probes of a server that answers nothing kept passing on the progress of calls that keep coming")
	}
}
