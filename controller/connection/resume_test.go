//go:build unix

package connection

import (
	"bytes"
	"context"
	"encoding/json"
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

// The delay before resuming a stream: the server's retry within
// [resumeFloor, resumeMaxDelay], the go-sdk's backoff when it sets none.
func TestResumeDelay(t *testing.T) {
	for _, tc := range []struct{ retry, want time.Duration }{
		{time.Millisecond, resumeFloor}, // retry: 1 is raised to the floor
		{resumeFloor, resumeFloor},
		{500 * time.Millisecond, 500 * time.Millisecond}, // a poller's retry is kept
		{3 * time.Second, 3 * time.Second},
		{time.Hour, resumeMaxDelay}, // the server's retry is capped
	} {
		if got := resumeDelay(tc.retry); got != tc.want {
			t.Errorf("retry %v: delay %v, want %v", tc.retry, got, tc.want)
		}
	}
	if got := resumeDelay(0); got < reconnectInitialDelay || got >= 2*reconnectInitialDelay {
		t.Errorf("no retry: delay %v, want the go-sdk's first backoff in [1s, 2s)", got)
	}
}

// The retry field: milliseconds, a negative or non-numeric value ignored,
// a huge one held to resumeMaxDelay rather than overflowing.
func TestEventStreamRetryField(t *testing.T) {
	for _, tc := range []struct {
		field string
		want  time.Duration
	}{
		{"retry: 500", 500 * time.Millisecond},
		{"retry: -5", 0},
		{"retry: soon", 0},
		{"retry: 9223372036854775807", resumeMaxDelay},
	} {
		es := newEventStream(strings.NewReader(tc.field+"\n\n"), 512)
		if _, err := es.next(); err == nil {
			t.Fatalf("%s: an event with no data was returned", tc.field)
		}
		if es.retry != tc.want {
			t.Errorf("%q: retry %v, want %v", tc.field, es.retry, tc.want)
		}
	}
}

// stormServer is a classic streamable HTTP server (a go-sdk one, stateful)
// whose event streams end after every event, each numbered afresh, each
// asking for retry (milliseconds): the standalone stream (when standalone is set; else
// it is held open quietly) and the stream of a call to the tool "storm",
// which brings the answer at its resumes-th resumption. It records when
// each GET came, per stream (and, first for the call's, its POST).
type stormServer struct {
	url        string
	standalone bool
	resumes    int
	retry      int

	mu     sync.Mutex
	gets   map[string][]time.Time // "s": the standalone stream's; "c": the call's
	callID json.RawMessage
}

func newStormServer(t *testing.T, standalone bool, resumes, retry int) *stormServer {
	t.Helper()
	ss := &stormServer{standalone: standalone, resumes: resumes, retry: retry, gets: map[string][]time.Time{}}
	srv := echoServer()
	srv.AddTool(&mcp.Tool{Name: "storm", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("the storm tool's stream is the test's")
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			ss.get(w, r)
			return
		}
		if m, id := rpcOf(r); m == "tools/call" && strings.Contains(peekBody(r), `"storm"`) {
			ss.mu.Lock()
			ss.callID = id
			ss.gets["c"] = append(ss.gets["c"], time.Now()) // the stream's start
			ss.mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "id: c0\nretry: %d\ndata:\n\n", ss.retry)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	ss.url = hs.URL
	return ss
}

// peekBody is r's body, left for the handler to read.
func peekBody(r *http.Request) string {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return string(body)
}

func (ss *stormServer) get(w http.ResponseWriter, r *http.Request) {
	last := r.Header.Get(hdrLastEventID)
	stream := "s"
	if strings.HasPrefix(last, "c") {
		stream = "c"
	}
	ss.mu.Lock()
	ss.gets[stream] = append(ss.gets[stream], time.Now())
	n, id := len(ss.gets[stream]), ss.callID
	ss.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	switch {
	case stream == "c" && n > ss.resumes: // the POST came first
		fmt.Fprintf(w, "id: c%d\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"calm\"}]}}\n\n", n, id)
	case stream == "c" || ss.standalone:
		fmt.Fprintf(w, "id: %s%d\nretry: %d\ndata:\n\n", stream, n, ss.retry)
	default:
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
}

// times is a copy of the GETs stream saw.
func (ss *stormServer) times(stream string) []time.Time {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return append([]time.Time(nil), ss.gets[stream]...)
}

// checkPaced fails unless every resumption came resumeFloor or more after
// the one before: a server-side gap is at least the delay tether waited.
func checkPaced(t *testing.T, what string, gets []time.Time) {
	t.Helper()
	for i := 1; i < len(gets); i++ {
		if gap := gets[i].Sub(gets[i-1]); gap < resumeFloor {
			t.Errorf("%s: GET %d came %v after the one before, under the floor %v (%d GETs)", what, i+1, gap, resumeFloor, len(gets))
		}
	}
}

// A server whose standalone stream ends after every event with retry: 1
// and a fresh id (progress, so streamMaxRetries never ends it) has tether
// GET it again no sooner than resumeFloor each time, not in a tight loop.
func TestStandaloneStreamStormIsPaced(t *testing.T) {
	ss := newStormServer(t, true, 0, 1)
	var logs lockedBuffer
	s := connect(t, Request{Spec: httpSpec(ss.url, ""), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !s.ownConn {
		t.Fatal("the session is not on tether's transport")
	}
	waitUntil(t, "4 GETs of the standalone stream", func() bool { return len(ss.times("s")) >= 4 })
	checkPaced(t, "standalone stream", ss.times("s"))
	// The log says that the server asked for less (once: at most a line
	// a minute).
	if n := strings.Count(logs.String(), warnPaced); n != 1 {
		t.Errorf("%d WARNs that the stream was resumed later than asked, want 1:\n%s", n, logs.String())
	}
	if line := logs.String(); !strings.Contains(line, "level=WARN") || !strings.Contains(line, "sooner than 250ms") {
		t.Errorf("the log: %s", line)
	}
}

// The same server's call stream, resumed on both roads that read it: the
// go-sdk session on tether's transport (CallTool) and the raw exchange
// (CallToolRaw).
func TestCallStreamStormIsPaced(t *testing.T) {
	const resumes = 3
	for _, road := range []string{"CallTool", "CallToolRaw"} {
		t.Run(road, func(t *testing.T) {
			ss := newStormServer(t, false, resumes, 1)
			var logs lockedBuffer
			s := connect(t, Request{Spec: httpSpec(ss.url, ""), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			var text string
			if road == "CallTool" {
				res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "storm", Arguments: map[string]any{}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				text = textOf(res)
			} else {
				res, _, err := s.CallToolRaw(ctx, "storm", nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				text = string(res)
			}
			if !strings.Contains(text, "calm") {
				t.Fatalf("the call's answer %q, want the one its last resumption brought", text)
			}
			gets := ss.times("c")
			if len(gets) != resumes+1 {
				t.Fatalf("%d resumptions, want %d", len(gets)-1, resumes)
			}
			checkPaced(t, road, gets)
			if !strings.Contains(logs.String(), warnPaced) {
				t.Errorf("no WARN that the call's stream was resumed later than asked:\n%s", logs.String())
			}
		})
	}
}

// On the go-sdk's own transport (here a 2026-07-28 session), whose
// reconnection rule tether cannot change, the resumptions of a call's
// stream still come resumeFloor apart at least, from the second on: the
// session's HTTP client holds them to it (resumeGate).
func TestSDKTransportStreamStormIsPaced(t *testing.T) {
	const resumes = 3
	srv := mcp.NewServer(&mcp.Implementation{Name: "modern-storm", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "storm", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("the storm tool's stream is the test's")
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	var mu sync.Mutex
	var gets []time.Time
	var callID json.RawMessage
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.Header.Get(hdrLastEventID), "c") {
			mu.Lock()
			gets = append(gets, time.Now())
			n, id := len(gets), callID
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			if n > resumes { // the POST came first
				fmt.Fprintf(w, "id: c%d\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"calm\"}]}}\n\n", n, id)
				return
			}
			fmt.Fprintf(w, "id: c%d\nretry: 1\ndata:\n\n", n)
			return
		}
		if m, id := rpcOf(r); m == "tools/call" && strings.Contains(peekBody(r), `"storm"`) {
			mu.Lock()
			callID = id
			gets = append(gets, time.Now())
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: c0\nretry: 1\ndata:\n\n")
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	var logs lockedBuffer
	s := connect(t, Request{Spec: httpSpec(hs.URL, ""), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if s.ownConn || s.Server().ProtocolVersion < protocol2026 {
		t.Fatalf("own transport %v, version %s: want the go-sdk's, 2026-07-28", s.ownConn, s.Server().ProtocolVersion)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "storm", Arguments: map[string]any{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if text := textOf(res); text != "calm" {
		t.Fatalf("the call's answer %q, want the one its last resumption brought", text)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(gets) != resumes+1 {
		t.Fatalf("%d resumptions, want %d", len(gets)-1, resumes)
	}
	// The first resumption goes when the go-sdk's delay says: the gate
	// does not see when the call's stream began.
	checkPaced(t, "the go-sdk's transport", gets[1:])
	if !strings.Contains(logs.String(), warnPaced) {
		t.Errorf("no WARN that the streams were resumed later than asked:\n%s", logs.String())
	}
}

// warnPaced is the WARN that a server asked to resume a stream sooner
// than the floor.
const warnPaced = "event stream resumed later than the server asked"

// The WARN that a server asked to resume its streams too soon comes once
// a minute at most, however many streams it ends.
func TestStreamsPacedWarnsOnceAMinute(t *testing.T) {
	var logs lockedBuffer
	s := &Session{log: slog.New(slog.NewTextHandler(&logs, nil))}
	for range 3 {
		s.streamsPaced()
	}
	if n := strings.Count(logs.String(), warnPaced); n != 1 {
		t.Fatalf("%d WARNs, want 1", n)
	}
	s.pacedAt.Add(-int64(time.Minute)) // a minute later
	s.streamsPaced()
	if n := strings.Count(logs.String(), warnPaced); n != 2 {
		t.Errorf("%d WARNs a minute later, want 2", n)
	}
}

// The gate holds only the go-sdk transport's resumptions: a GET with
// Last-Event-ID that tether did not pace itself. Every other request
// passes at once and leaves the gate as it was.
func TestResumeGatePassesOthers(t *testing.T) {
	g := &resumeGate{}
	get := func(ctx context.Context, lastID string) *http.Request {
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://example.invalid/mcp", nil)
		if lastID != "" {
			r.Header.Set(hdrLastEventID, lastID)
		}
		return r
	}
	post := httptest.NewRequest(http.MethodPost, "http://example.invalid/mcp", nil)
	post.Header.Set(hdrLastEventID, "1")
	for name, r := range map[string]*http.Request{
		"a POST":                    post,
		"a GET without an event id": get(context.Background(), ""),
		"a resumption tether paced": get(withPaced(context.Background()), "1"),
	} {
		answered, err := g.admit(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		answered()
		if !g.last.IsZero() {
			t.Errorf("%s counted as a resumption of the go-sdk's transport", name)
		}
	}
	answered, err := g.admit(get(context.Background(), "1"))
	if err != nil {
		t.Fatal(err)
	}
	answered()
	if g.last.IsZero() {
		t.Error("a resumption of the go-sdk's transport was not counted")
	}
	// One admitted after it waits; its ctx ending ends the wait.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.admit(get(ctx, "2")); err == nil {
		t.Error("a resumption right after another went at once")
	}
}

// A polling server (SEP-1699) that ends its call's stream at once after
// every progress event, asking for retry: 500, is resumed at 500 ms every
// time, on both roads, however many quick ends in a row: its answer
// reaches the client when the server asked, not later and later.
func TestPollerResumedAtItsRetry(t *testing.T) {
	const resumes = 10
	for _, road := range []string{"CallTool", "CallToolRaw"} {
		t.Run(road, func(t *testing.T) {
			ss := newStormServer(t, false, resumes, 500)
			c := newConnector(t)
			var mu sync.Mutex
			var delays []time.Duration
			c.resumeWait = func(_ context.Context, d time.Duration) error {
				mu.Lock()
				delays = append(delays, d)
				mu.Unlock()
				return nil // the test's server asks to be resumed; no need to wait
			}
			var logs lockedBuffer
			s := connectWith(t, c, Request{Spec: httpSpec(ss.url, ""), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if !s.ownConn {
				t.Fatal("the session is not on tether's transport")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			var err error
			if road == "CallTool" {
				_, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "storm", Arguments: map[string]any{}}, nil)
			} else {
				_, _, err = s.CallToolRaw(ctx, "storm", nil, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(delays) != resumes {
				t.Fatalf("%d resumptions waited for, want %d", len(delays), resumes)
			}
			for i, d := range delays {
				if d != 500*time.Millisecond {
					t.Errorf("resumption %d waited %v, want the 500ms the server asked (all: %v)", i+1, d, delays)
					break
				}
			}
			if strings.Contains(logs.String(), warnPaced) {
				t.Errorf("a WARN for a server that asked for more than the floor:\n%s", logs.String())
			}
		})
	}
}
