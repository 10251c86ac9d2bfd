//go:build unix

package connection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// repeat is a reader of head followed by body repeated up to limit bytes in
// all (endless for the limits under test), counting what it gave.
type repeat struct {
	head, body []byte
	n, limit   int
}

func (r *repeat) Read(p []byte) (int, error) {
	if r.n >= r.limit {
		return 0, io.EOF
	}
	k := 0
	for k < len(p) && r.n < r.limit {
		var c byte
		if r.n < len(r.head) {
			c = r.head[r.n]
		} else {
			c = r.body[(r.n-len(r.head))%len(r.body)]
		}
		p[k] = c
		k++
		r.n++
	}
	return k, nil
}

func limitedResponse(contentType string, body io.Reader, l *messageLimit) *http.Response {
	resp := &http.Response{Header: http.Header{"Content-Type": {contentType}}, Body: io.NopCloser(body)}
	return l.wrap(resp)
}

// TestLimitedBody: an event stream is bounded event by event (an event that
// never ends counts as one), any other body as a whole; many events under
// the bound pass however long the stream. Over the bound, reads keep
// failing with the limit's error, and the session hears of it once.
func TestLimitedBody(t *testing.T) {
	const max = 1000
	cases := []struct {
		name, contentType string
		body              *repeat
		over              bool
	}{
		{"an SSE event that never ends", "text/event-stream", &repeat{head: []byte("data: "), body: []byte("a"), limit: 1 << 20}, true},
		{"an SSE event of many lines and no blank line", "text/event-stream", &repeat{body: []byte("data: aaaa\n"), limit: 1 << 20}, true},
		{"many SSE events under the bound (LF)", "text/event-stream; charset=utf-8", &repeat{body: []byte("data: " + strings.Repeat("a", 900) + "\n\n"), limit: 1 << 20}, false},
		{"many SSE events under the bound (CRLF)", "text/event-stream", &repeat{body: []byte("id: 1\r\ndata: " + strings.Repeat("a", 900) + "\r\n\r\n"), limit: 1 << 20}, false},
		{"many SSE events under the bound (CR)", "text/event-stream", &repeat{body: []byte("data: " + strings.Repeat("a", 900) + "\r\r"), limit: 1 << 20}, false},
		{"SSE events at the bound", "text/event-stream", &repeat{body: []byte("data: " + strings.Repeat("a", max-6) + "\n\n"), limit: 1 << 20}, false},
		{"CRLF line ends are not blank lines", "text/event-stream", &repeat{body: []byte("data: aaaa\r\n"), limit: 1 << 20}, true},
		{"a JSON body over the bound", "application/json", &repeat{head: []byte(`{"jsonrpc":"2.0","result":"`), body: []byte("a"), limit: 1 << 20}, true},
		{"a JSON body at the bound", "application/json", &repeat{body: []byte("a"), limit: max}, false},
		{"a body of another type over the bound", "text/html", &repeat{body: []byte("a\n\n"), limit: 1 << 20}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hits := 0
			l := &messageLimit{conn: "big", max: max, onHit: func(error) { hits++ }}
			resp := limitedResponse(c.contentType, c.body, l)
			n, err := io.Copy(io.Discard, resp.Body)
			if !c.over {
				if err != nil || int(n) != c.body.limit {
					t.Fatalf("read %d of %d bytes, err %v: want all of it", n, c.body.limit, err)
				}
				if hits != 0 || l.err() != nil {
					t.Errorf("the limit was recorded as hit (%d, %v)", hits, l.err())
				}
				return
			}
			var tooLarge *MessageTooLargeError
			if !errors.As(err, &tooLarge) {
				t.Fatalf("err = %v, want a MessageTooLargeError", err)
			}
			for _, want := range []string{"connection big", "1000 bytes", "--max-message-bytes"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			// Bounded: what was read is the limit plus at most one read.
			if c.body.n > max+32<<10 {
				t.Errorf("read %d bytes before refusing (limit %d)", c.body.n, max)
			}
			if n > max {
				t.Errorf("passed on %d bytes, more than the limit", n)
			}
			if _, again := resp.Body.Read(make([]byte, 10)); !errors.Is(again, err) {
				t.Errorf("a read after the limit = %v, want the limit's error again", again)
			}
			if hits != 1 || !errors.Is(l.err(), err) {
				t.Errorf("the session heard of it %d times (err %v), want once", hits, l.err())
			}
		})
	}
}

// TestMessageLimitExplains: the go-sdk's stdio frame error is the limit's
// too, and an error the go-sdk made of a failed read gets the limit's
// reason in front, once.
func TestMessageLimitExplains(t *testing.T) {
	// Over HTTP, or quoted by the server in its own error, the go-sdk's
	// words are no hit.
	frame := errors.New("calling \"tools/call\": " + sdkFrameTooLarge)
	if got := (&messageLimit{conn: "web", max: 16 << 20}).explain(frame); got != frame {
		t.Errorf("explain over HTTP = %v, want the error unchanged", got)
	}
	quoted := fmt.Errorf("calling: %w", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: sdkFrameTooLarge})
	if got := (&messageLimit{conn: "big", max: 16 << 20, stdio: true}).explain(quoted); got != quoted {
		t.Errorf("explain(the server's own error) = %v, want it unchanged", got)
	}

	l := &messageLimit{conn: "big", max: 16 << 20, stdio: true}
	plain := errors.New("calling \"tools/call\": connection closed")
	if got := l.explain(plain); got != plain {
		t.Errorf("explain before any hit = %v, want the error unchanged", got)
	}
	got := l.explain(frame)
	if !errors.Is(got, frame) || !strings.Contains(got.Error(), "a stdio frame of more than 16777216 bytes (the limit set by --max-message-bytes)") {
		t.Errorf("explain(frame error) = %v", got)
	}
	if again := l.explain(got); again != got {
		t.Errorf("explaining twice = %v, want it once", again)
	}
	if got := l.explain(plain); !strings.Contains(got.Error(), "connection big: the server sent a stdio frame") {
		t.Errorf("explain after the hit = %v, want the limit's reason", got)
	}
}

// hostileHandler serves inner, except that a tools/call of the tool
// "endless-sse" is answered 200 text/event-stream and then data without end
// (no newline), and one of "endless-json" 200 application/json without end:
// the answers that grew tether without bound (issue 21, item 1). streams
// counts the endless answers that are still being written.
func hostileHandler(inner http.Handler, streams *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			inner.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			Method string
			Params struct{ Name string }
		}
		_ = json.Unmarshal(body, &msg)
		kind := ""
		if msg.Method == "tools/call" {
			kind = map[string]string{"endless-sse": "text/event-stream", "endless-json": "application/json"}[msg.Params.Name]
		}
		if kind == "" {
			r.Body = io.NopCloser(bytes.NewReader(body))
			inner.ServeHTTP(w, r)
			return
		}
		streams.Add(1)
		defer streams.Add(-1)
		w.Header().Set("Content-Type", kind)
		w.WriteHeader(http.StatusOK)
		head := `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`
		if kind == "application/json" {
			head = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`
		}
		if _, err := io.WriteString(w, head); err != nil {
			return
		}
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		rc := http.NewResponseController(w)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			_ = rc.Flush()
		}
	})
}

// hostileServer is a real go-sdk MCP server with the tools hello,
// endless-sse and endless-json behind hostileHandler.
func hostileServer(t *testing.T, streams *atomic.Int32) *httptest.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	for _, name := range []string{"hello", "endless-sse", "endless-json"} {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil
			})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(hostileHandler(h, streams))
	t.Cleanup(hs.Close)
	return hs
}

// TestMessageLimitHTTP: a streamable HTTP server that answers a call with
// an endless event or an endless JSON body fails the call with the limit's
// error, naming the connection, the bound and the flag, on the go-sdk's
// path and on the raw path; the session ends with that error (its owner
// connects again), and tether stops reading: the server's endless writes
// end.
func TestMessageLimitHTTP(t *testing.T) {
	var streams atomic.Int32
	hs := hostileServer(t, &streams)
	const max = 256 << 10
	for _, tool := range []string{"endless-sse", "endless-json"} {
		for _, path := range []string{"go-sdk", "raw"} {
			t.Run(tool+" "+path, func(t *testing.T) {
				s := connect(t, Request{Name: "hostile", Spec: httpSpec(hs.URL, ""), MaxMessageBytes: max})
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				// A call under the bound passes.
				if res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "hello"}, nil); err != nil || textOf(res) != "hello" {
					t.Fatalf("hello = %v, %v", res, err)
				}
				var err error
				if path == "raw" {
					_, _, err = s.CallToolRaw(ctx, tool, nil, nil)
				} else {
					_, err = s.CallTool(ctx, &mcp.CallToolParams{Name: tool}, nil)
				}
				if err == nil {
					t.Fatal("the endless answer passed")
				}
				want := "connection hostile: the server sent " + map[string]string{"endless-sse": "an SSE event", "endless-json": "an HTTP response body"}[tool] +
					" of more than 262144 bytes (the limit set by --max-message-bytes)"
				if !strings.Contains(err.Error(), want) {
					t.Errorf("call error %q lacks %q", err, want)
				}
				waitDone(t, s, 10*time.Second)
				if err := s.Err(); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("the session ended with %v, want %q", err, want)
				}
				deadline := time.Now().Add(10 * time.Second)
				for streams.Load() != 0 {
					if time.Now().After(deadline) {
						t.Fatal("the server is still writing its endless answer: tether did not stop reading")
					}
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
	}
}

// gateWriter lets a test take over an SSE stream the go-sdk's handler
// writes: once hijacked, the handler's writes are dropped.
type gateWriter struct {
	http.ResponseWriter
	mu       sync.Mutex
	hijacked bool
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.hijacked {
		return len(p), nil
	}
	return g.ResponseWriter.Write(p)
}

func (g *gateWriter) Flush() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.hijacked {
		_ = http.NewResponseController(g.ResponseWriter).Flush()
	}
}

// TestMessageLimitSSETransport: over the older SSE transport, where every
// message comes on the one GET stream, an event that never ends (sent when
// the tool endless-sse is called) ends the session with the limit's error.
func TestMessageLimitSSETransport(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "hostile-sse", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "endless-sse", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	sse := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var stream atomic.Pointer[gateWriter]
	var writing atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			g := &gateWriter{ResponseWriter: w}
			stream.Store(g)
			sse.ServeHTTP(g, r)
			// The endless writer holds the lock while it writes: the
			// stream must outlive it.
			g.mu.Lock()
			g.hijacked = true // nothing more goes out on this stream
			g.mu.Unlock()
			return
		}
		body, _ := io.ReadAll(r.Body)
		g := stream.Load()
		if g == nil || !bytes.Contains(body, []byte(`"name":"endless-sse"`)) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			sse.ServeHTTP(w, r)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		g.mu.Lock() // the go-sdk's writes wait, then are dropped
		g.hijacked = true
		writing.Add(1)
		go func() {
			defer g.mu.Unlock()
			defer writing.Add(-1)
			chunk := bytes.Repeat([]byte("x"), 32<<10)
			if _, err := io.WriteString(g.ResponseWriter, "event: message\ndata: "); err != nil {
				return
			}
			for {
				if _, err := g.ResponseWriter.Write(chunk); err != nil {
					return
				}
				if http.NewResponseController(g.ResponseWriter).Flush() != nil {
					return
				}
			}
		}()
	}))
	t.Cleanup(hs.Close)

	s := connect(t, Request{Name: "hostile-sse", Spec: httpSpec(hs.URL, "sse"), MaxMessageBytes: 256 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "endless-sse"}, nil)
	want := "connection hostile-sse: the server sent an SSE event of more than 262144 bytes (the limit set by --max-message-bytes)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("call error %v, want %q", err, want)
	}
	waitDone(t, s, 10*time.Second)
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("the session ended with %v, want %q", err, want)
	}
	deadline := time.Now().Add(10 * time.Second)
	for writing.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the server is still writing its endless event: tether did not stop reading")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
