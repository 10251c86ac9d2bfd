//go:build unix

package connection

//lint:file-ignore SA1019 relaying sampling (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

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

	"github.com/tether-mcp/tether/controller/gateway/wire"
)

// A server that cancels its own question (notifications/cancelled for the
// sampling request it sent while working on a call) ends the question
// tether relays for it: the client's request ends, on both roads a call
// takes (the go-sdk session, the raw exchange, which read the question on
// the call's stream). The server's tool waits for the question to end
// before it answers the call.
func TestServerCancelEndsRelayedQuestion(t *testing.T) {
	for _, road := range []string{"CallTool", "CallToolRaw"} {
		t.Run(road, func(t *testing.T) {
			c := &blockingCaller{fakeCaller: fakeCaller{client: "A", caps: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}},
				entered: make(chan struct{}), release: make(chan struct{})}
			ended := make(chan struct{})
			srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
			srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					qctx, cancel := context.WithCancel(ctx)
					asked := make(chan struct{})
					go func() {
						defer close(asked)
						_, _ = req.Session.CreateMessage(qctx, &mcp.CreateMessageParams{MaxTokens: 1,
							Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "?"}}}})
					}()
					select {
					case <-c.entered:
					case <-ctx.Done():
						cancel()
						return nil, ctx.Err()
					}
					cancel() // the server gives up its question
					<-asked
					text := "gave up, and the question ended"
					select {
					case <-ended:
					case <-time.After(5 * time.Second):
						text = "gave up, but the question is still asked"
					}
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
				})
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
			var answers atomic.Int32 // responses tether sent the server (to its question)
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if m, id := rpcOf(r); r.Method == http.MethodPost && m == "" && len(id) > 0 {
					answers.Add(1)
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(hs.Close)
			s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
			ctx, cancel := context.WithTimeout(wire.WithCaller(t.Context(), &endingCaller{c, ended}), 20*time.Second)
			defer cancel()
			var text string
			if road == "CallTool" {
				res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				text = textOf(res)
			} else {
				res, _, err := s.CallToolRaw(ctx, "ask", nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				var r mcp.CallToolResult
				if err := json.Unmarshal(res, &r); err != nil {
					t.Fatal(err)
				}
				text = textOf(&r)
			}
			if text != "gave up, and the question ended" {
				t.Errorf("the call answered %q", text)
			}
			// The spec: no response to a cancelled request. (The go-sdk
			// client answers its cancelled handler's error anyway.)
			if n := answers.Load(); road == "CallToolRaw" && n != 0 {
				t.Errorf("tether answered the question the server withdrew (%d responses)", n)
			}
		})
	}
}

// endingCaller closes ended once its sampling request returned, which a
// blockingCaller's does when its ctx ends.
type endingCaller struct {
	*blockingCaller
	ended chan struct{}
}

func (c *endingCaller) CreateMessage(ctx context.Context, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	defer close(c.ended)
	return c.blockingCaller.CreateMessage(ctx, p)
}

// askedCaller is a client asked for a sample that answers once release is
// closed, and records its log messages and its answer in order.
type askedCaller struct {
	fakeCaller
	entered chan struct{}
	release chan struct{}

	mu   sync.Mutex
	seen []string
}

func (c *askedCaller) LogLevel() mcp.LoggingLevel { return "debug" }

func (c *askedCaller) Log(p *mcp.LoggingMessageParams) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, fmt.Sprint(p.Data))
}

func (c *askedCaller) CreateMessage(ctx context.Context, _ *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	close(c.entered)
	select {
	case <-c.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.mu.Lock()
	c.seen = append(c.seen, "answer")
	c.mu.Unlock()
	return &mcp.CreateMessageWithToolsResult{Model: "m", Content: []mcp.Content{&mcp.TextContent{Text: "a"}}}, nil
}

func (c *askedCaller) got() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.seen)
}

// A log message the server sends on a raw call's stream while its question
// waits for the client reaches the client once the client answered, as it
// did when the stream was not read meanwhile: for a 2026-07-28 client it is
// the next round's (docs/contract.md §5). The server pings on the stream
// after the message: once tether answered the ping it read the message.
func TestRawLogWhileAskedWaitsForTheAnswer(t *testing.T) {
	c := &askedCaller{fakeCaller: fakeCaller{client: "A", caps: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}},
		entered: make(chan struct{}), release: make(chan struct{})}
	pinged := make(chan string, 1)
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{}}})
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			asked := make(chan error, 1)
			go func() {
				_, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 1,
					Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "?"}}}})
				asked <- err
			}()
			select {
			case <-c.entered:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "while asked"})
			err := req.Session.Ping(ctx, nil)
			pinged <- fmt.Sprint(err)
			if err := <-asked; err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
	ctx, cancel := context.WithTimeout(wire.WithCaller(t.Context(), c), 20*time.Second)
	defer cancel()
	if err := s.SetLogLevel(ctx, "debug"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := s.CallToolRaw(ctx, "ask", nil, nil)
		done <- err
	}()
	select {
	case err := <-pinged:
		if err != "<nil>" {
			t.Fatalf("ping: %s", err)
		}
	case <-ctx.Done():
		t.Fatal("the server never pinged")
	}
	if got := c.got(); got != "[]" {
		t.Errorf("while its question waited the client got %s, want nothing yet", got)
	}
	close(c.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := c.got(); got != "[answer while asked]" {
		t.Errorf("the client saw %s, want [answer while asked]", got)
	}
}
