//go:build unix

package connection

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestVersionMemo(t *testing.T) {
	ctx := context.Background()
	vm := versionMemo{m: make(map[string]*endpointVersion)}

	// Nothing known: negotiate, and learn.
	v, done := vm.versionFor(ctx, "a")
	if v != "" {
		t.Fatalf("unknown endpoint: version %q, want to negotiate", v)
	}
	// Another connect meanwhile waits for the learner, then uses what it
	// learned.
	got := make(chan string, 1)
	go func() {
		v, _ := vm.versionFor(ctx, "a")
		got <- v
	}()
	select {
	case v := <-got:
		t.Fatalf("a second connect did not wait for the learner: %q", v)
	case <-time.After(50 * time.Millisecond):
	}
	done("2025-11-25", false)
	select {
	case v := <-got:
		if v != "2025-11-25" {
			t.Fatalf("after the learner: %q, want 2025-11-25", v)
		}
	case <-time.After(time.Second):
		t.Fatal("the waiting connect was not released")
	}

	// A connect that used the memory and failed drops it.
	v, done = vm.versionFor(ctx, "a")
	if v != "2025-11-25" {
		t.Fatalf("remembered: %q", v)
	}
	done("", true)
	if v, done = vm.versionFor(ctx, "a"); v != "" {
		t.Fatalf("after a failed connect: %q, want to negotiate again", v)
	}
	// A learner that fails teaches nothing.
	done("", true)
	if vm.m["a"] != nil {
		t.Fatal("a failed learner left a memory")
	}
	// A learner whose initialize was answered (its waiters go on) and
	// whose connect then fails drops what it taught; the same answer told
	// again (Connect tells it at initialize and once connected) keeps it.
	_, done = vm.versionFor(ctx, "a")
	done("2025-06-18", false)
	if v, _ := vm.versionFor(ctx, "a"); v != "2025-06-18" {
		t.Fatalf("after the learner's initialize: %q, want 2025-06-18", v)
	}
	done("2025-06-18", false)
	if v, _ := vm.versionFor(ctx, "a"); v != "2025-06-18" {
		t.Fatalf("after the learner's second call: %q, want 2025-06-18", v)
	}
	done("", true)
	if vm.m["a"] != nil {
		t.Fatal("a learner that failed after its initialize left a memory")
	}
	// A learner whose connect ends at another version than it first told
	// (its discover accepted on tether's transport, the go-sdk's falling
	// back to initialize) drops what it taught; so does a connect that
	// used the memory and agreed to another version (a server downgraded
	// on the same URL), which would else send every classic session to
	// the go-sdk's transport until the memory expires.
	_, done = vm.versionFor(ctx, "a")
	done(protocol2026, false)
	done("2025-11-25", false)
	if vm.m["a"] != nil {
		t.Fatalf("a learner that ended at another version left %+v", vm.m["a"])
	}
	_, done = vm.versionFor(ctx, "a")
	done(protocol2026, false)
	if v, done = vm.versionFor(ctx, "a"); v != protocol2026 {
		t.Fatalf("remembered: %q, want %s", v, protocol2026)
	}
	done("2025-11-25", false)
	if vm.m["a"] != nil {
		t.Fatalf("a connect that agreed to another version left %+v", vm.m["a"])
	}

	// A 2026-07-28 server: negotiated each time (the go-sdk's transport
	// asks discover), and nobody waits.
	_, done = vm.versionFor(ctx, "b")
	done(protocol2026, false)
	if v, _ := vm.versionFor(ctx, "b"); v != protocol2026 {
		t.Fatalf("2026 server: %q, want %s (discover on the go-sdk's transport)", v, protocol2026)
	}
	if e := vm.m["b"]; e == nil || e.learning != nil {
		t.Fatal("a 2026 server is being learned again: the next connects would wait")
	}

	// An old memory is asked again.
	_, done = vm.versionFor(ctx, "c")
	done("2025-06-18", false)
	vm.m["c"].learned = time.Now().Add(-versionMemoTTL - time.Second)
	if v, _ := vm.versionFor(ctx, "c"); v != "" {
		t.Fatalf("expired memory used: %q", v)
	}

	// A learner that never finishes holds others at most versionLearnWait,
	// or until their ctx ends.
	_, _ = vm.versionFor(ctx, "d")
	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	if v, _ := vm.versionFor(cctx, "d"); v != "" {
		t.Fatalf("stuck learner: %q", v)
	}
	if d := time.Since(start); d > versionLearnWait/2 {
		t.Fatalf("waited %s past its ctx", d)
	}
}

// methodServer is a go-sdk server that records the messages it is sent;
// sent returns those of one method.
func methodServer(t *testing.T, stateless bool) (url string, sent func(method string) [][]byte) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "methods", Version: "1"}, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	var mu sync.Mutex
	var bodies [][]byte
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, body)
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func(method string) [][]byte {
		mu.Lock()
		defer mu.Unlock()
		var out [][]byte
		for _, b := range bodies {
			if bytes.Contains(b, []byte(`"method":"`+method+`"`)) {
				out = append(out, b)
			}
		}
		return out
	}
}

// A server that refuses server/discover is asked once per endpoint; the next
// sessions start with initialize at the version it agreed to. A 2026-07-28
// server is asked every time: discover is its handshake (twice the first
// time: see TestFirstConnectTo2026Server).
func TestVersionRemembered(t *testing.T) {
	t.Run("refuses discover", func(t *testing.T) {
		url, sent := methodServer(t, false)
		c := newConnector(t)
		var first string
		for i := range 3 {
			s := connectWith(t, c, Request{Spec: httpSpec(url, "")})
			if i == 0 {
				first = s.Server().ProtocolVersion
			} else if v := s.Server().ProtocolVersion; v != first {
				t.Errorf("session %d negotiated %s, the first %s", i, v, first)
			}
		}
		if n := len(sent("server/discover")); n != 1 {
			t.Errorf("server/discover sent %d times for 3 sessions, want 1", n)
		}
		if n := len(sent("initialize")); n != 3 {
			t.Errorf("initialize sent %d times, want 3", n)
		}
	})
	t.Run("2026-07-28", func(t *testing.T) {
		url, sent := methodServer(t, true)
		c := newConnector(t)
		for range 2 {
			if v := connectWith(t, c, Request{Spec: httpSpec(url, "")}).Server().ProtocolVersion; v < protocol2026 {
				t.Fatalf("negotiated %s with a stateless go-sdk server", v)
			}
		}
		// The first session asks it on tether's transport, which does not
		// carry a 2026-07-28 session, and again on the go-sdk's.
		if n := len(sent("server/discover")); n != 3 {
			t.Errorf("server/discover sent %d times for 2 sessions, want 3", n)
		}
	})
}

// TestVersionLearnedAtInitialize: the connects waiting for an endpoint's
// version go on once the learner's initialize is answered, not after the
// learner's whole handshake: here the learner's standalone stream (which the
// go-sdk opens before Connect returns) is held until a second connect to the
// endpoint is done, and that one starts with initialize at the learnt
// version, sending no server/discover of its own.
func TestVersionLearnedAtInitialize(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "held", Version: "1"}, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var mu sync.Mutex
	var discovers, gets int
	heldGet := make(chan struct{})
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"method":"server/discover"`)) {
				mu.Lock()
				discovers++
				mu.Unlock()
			}
		case http.MethodGet:
			mu.Lock()
			gets++
			first := gets == 1
			mu.Unlock()
			if first {
				close(heldGet)
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	var once sync.Once
	unhold := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unhold)

	c := newConnector(t)
	type outcome struct {
		s   *Session
		err error
	}
	learner := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s, err := c.Connect(ctx, Request{Name: "learner", Spec: httpSpec(ts.URL, ""), Logger: testLogger(t)})
		learner <- outcome{s, err}
	}()
	select {
	case <-heldGet:
	case <-time.After(20 * time.Second):
		t.Fatal("the learner never opened its standalone stream")
	}
	second := connectWith(t, c, Request{Name: "second", Spec: httpSpec(ts.URL, "")})
	mu.Lock()
	n := discovers
	mu.Unlock()
	if n != 1 {
		t.Errorf("server/discover sent %d times, want 1 (the learner's): the second connect did not use the version the learner's initialize was answered with", n)
	}
	if v := second.Server().ProtocolVersion; v == "" || v >= protocol2026 {
		t.Errorf("second session negotiated %q", v)
	}
	unhold()
	if o := <-learner; o.err != nil {
		t.Errorf("learner: %v", o.err)
	} else {
		o.s.Close()
	}
}
