//go:build unix

package connection

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
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
			// Sent as bytes beside the go-sdk (rawPage).
			{"tools list", func(ctx context.Context, s *Session) error { return s.RefreshTools(ctx) }},
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

// A call made after another request of the session met the server's 404,
// in the moment before the session ends, is refused by the go-sdk without
// being sent ("connection closed"). It fails as a lost session
// (mcp.ErrSessionMissing, not reached), so that the gateway sends it again
// on the new session: answered "connection closed", the gateway failed the
// first call after a backend restart (TestCallSurvivesBackendRestart, its
// 2026-07-28 client, once under load). A notification the server holds
// keeps the go-sdk's connection from closing, and so the session from
// ending, for as long as the test needs.
func TestCallRefusedAfterTheSessionWasLost(t *testing.T) {
	var forgot atomic.Bool
	var echoes, lost atomic.Int32
	started, held, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var startOnce, holdOnce, releaseOnce sync.Once
	srv := echoServer()
	srv.AddTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			startOnce.Do(func() { close(started) })
			select {
			case <-ctx.Done():
			case <-release:
			}
			return &mcp.CallToolResult{}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") == "" {
			h.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"notifications/cancelled"`)) {
			holdOnce.Do(func() { close(held) })
			select {
			case <-release:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if bytes.Contains(body, []byte(`"echo"`)) {
			echoes.Add(1)
		}
		if forgot.Load() {
			lost.Add(1)
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	done := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(done)
	s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%s did not happen", what)
		}
	}

	// A call given up on: the go-sdk sends notifications/cancelled, which
	// the server holds.
	slowCtx, giveUp := context.WithCancel(ctx)
	slowDone := make(chan struct{})
	go func() {
		defer close(slowDone)
		_, _ = s.cs.CallTool(slowCtx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
	}()
	wait(started, "the slow call's start")
	giveUp()
	wait(slowDone, "the slow call's return")
	wait(held, "the notifications/cancelled's arrival")

	// The server forgets the session; a request of the session (sent
	// beneath tether, as the go-sdk's standalone stream would) meets the
	// 404 first, and the go-sdk's connection fails.
	forgot.Store(true)
	if _, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); !errors.Is(err, mcp.ErrSessionMissing) {
		t.Fatalf("the request that met the 404: %v, want mcp.ErrSessionMissing", err)
	}
	if s.Err() != nil {
		t.Fatalf("the session ended before the call (the test proves nothing): %v", s.Err())
	}
	_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, nil)
	if n := echoes.Load(); n != 1 {
		t.Fatalf("the server saw %d echo requests, want 1 (the call must be refused before it is sent)", n)
	}
	if !errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, wire.ErrCallReached) {
		t.Errorf("a call refused after the server lost the session: %v, want mcp.ErrSessionMissing (not reached)", err)
	}
	done()
	waitDone(t, s, 10*time.Second)
	if !errors.Is(s.Err(), mcp.ErrSessionMissing) {
		t.Errorf("the session ended with %v, want mcp.ErrSessionMissing", s.Err())
	}
	if lost.Load() == 0 {
		t.Error("the server never answered 404")
	}
}

// A call whose caller's ctx was cancelled as its session ended, because it
// ended (the gateway cancels the calls on a connection that is dropped),
// fails with the session's cause: mcp.ErrSessionMissing when the server
// lost the session, so that the gateway sends it again. The go-sdk, with
// both its answer and the cancellation at hand, may return either; given
// the cancellation, the first call after a backend restart failed with
// "not connected" (TestCallSurvivesBackendRestart/npm_server, once under
// load). A caller's deadline is still the caller's.
func TestCallCancelledAsItsSessionEnded(t *testing.T) {
	var forgot atomic.Bool
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if forgot.Load() && r.Header.Get("Mcp-Session-Id") != "" {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
	forgot.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A request beneath tether meets the 404: the session ends, lost.
	_, _ = s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
	waitDone(t, s, 10*time.Second)
	if !errors.Is(s.Err(), mcp.ErrSessionMissing) {
		t.Fatalf("the session ended with %v, want mcp.ErrSessionMissing (the test proves nothing)", s.Err())
	}

	cancelled, cancelCall := context.WithCancel(context.Background())
	cancelCall()
	if err := s.callErr(`tools/call "echo"`, cancelled, context.Canceled); !errors.Is(err, mcp.ErrSessionMissing) {
		t.Errorf("a call cancelled as its lost session ended: %v, want mcp.ErrSessionMissing", err)
	}
	expired, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop()
	if err := s.callErr(`tools/call "echo"`, expired, context.DeadlineExceeded); errors.Is(err, mcp.ErrSessionMissing) || !strings.Contains(err.Error(), "no answer in time") {
		t.Errorf("a call whose caller's deadline passed: %v, want the deadline's error", err)
	}
}

// A call whose request the server had read in full but not yet answered
// when another request of the session met the server's 404 may have run:
// the session ends as lost, and the call's ctx is cancelled with it (the
// gateway cancels the calls of a connection it drops), but the call fails
// as reached (wire.ErrCallReached, not mcp.ErrSessionMissing), so that the
// gateway does not send it again: a tools/call is not idempotent. (A
// server whose replicas do not share sessions answers so, and one that
// answers JSON once its tool ends takes the call in exactly this state.)
func TestCallTakenButUnansweredIsNotSentAgain(t *testing.T) {
	for _, raw := range []bool{false, true} {
		name := map[bool]string{false: "call", true: "raw call"}[raw]
		t.Run(name, func(t *testing.T) {
			var forgot atomic.Bool
			var taken atomic.Int32
			arrived := make(chan struct{})
			var arriveOnce sync.Once
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") != "" {
					body, _ := io.ReadAll(r.Body)
					r.Body = io.NopCloser(bytes.NewReader(body))
					if bytes.Contains(body, []byte(`"slow"`)) {
						// Taken, and being run: no answer yet.
						taken.Add(1)
						arriveOnce.Do(func() { close(arrived) })
						<-r.Context().Done()
						return
					}
				}
				if forgot.Load() && r.Header.Get("Mcp-Session-Id") != "" {
					http.Error(w, "session not found", http.StatusNotFound)
					return
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(hs.Close)
			s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// The caller's ctx ends with the session, as the gateway's does.
			callerCtx, stop := context.WithCancel(ctx)
			defer stop()
			go func() {
				select {
				case <-s.Done():
					stop()
				case <-callerCtx.Done():
				}
			}()
			errc := make(chan error, 1)
			go func() {
				var err error
				if raw {
					_, _, err = s.CallToolRaw(callerCtx, "slow", nil, nil)
				} else {
					_, err = s.CallTool(callerCtx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}}, nil)
				}
				errc <- err
			}()
			select {
			case <-arrived:
			case <-ctx.Done():
				t.Fatal("the slow call never reached the server")
			}
			forgot.Store(true)
			if _, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); !errors.Is(err, mcp.ErrSessionMissing) {
				t.Fatalf("the request that met the 404: %v, want mcp.ErrSessionMissing", err)
			}
			var err error
			select {
			case err = <-errc:
			case <-ctx.Done():
				t.Fatal("the slow call did not return once its session ended")
			}
			if errors.Is(err, mcp.ErrSessionMissing) || !errors.Is(err, wire.ErrCallReached) {
				t.Errorf("a call the server had taken when the session was lost: %v, want wire.ErrCallReached (not mcp.ErrSessionMissing: it must not be sent again)", err)
			}
			if n := taken.Load(); n != 1 {
				t.Errorf("the server took the call %d times, want 1", n)
			}
		})
	}
}
