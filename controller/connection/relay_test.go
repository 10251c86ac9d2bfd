package connection

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
)

// fakeCaller is a downstream client of the gateway.
type fakeCaller struct {
	client string
	caps   *mcp.ClientCapabilities
	logs   []string
}

func (c *fakeCaller) Client() any { return c.client }
func (c *fakeCaller) Log(p *mcp.LoggingMessageParams) {
	c.logs = append(c.logs, p.Logger+": "+p.Data.(string))
}
func (c *fakeCaller) LogLevel() mcp.LoggingLevel            { return "" }
func (c *fakeCaller) Capabilities() *mcp.ClientCapabilities { return c.caps }
func (c *fakeCaller) CreateMessage(context.Context, *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	return &mcp.CreateMessageWithToolsResult{Model: c.client}, nil
}
func (c *fakeCaller) Elicit(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "decline"}, nil
}
func (c *fakeCaller) ListRoots(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///" + c.client}}}, nil
}

// TestRelatedFlight: a server's message with no stream of its own belongs
// to the requests in flight when they all come from one client; with none,
// or with several clients', the server gets an MCP error that says why.
func TestRelatedFlight(t *testing.T) {
	s := &Session{name: "conn", log: slog.New(slog.DiscardHandler), red: newRedactor(nil, nil)}
	ctx := context.Background()
	sampling := &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}
	relay := func() (string, error) {
		res, err := s.relayRequest(ctx, nil, methodCreateMessage, nil)
		return string(res), err
	}

	if _, err := relay(); err == nil || !strings.Contains(err.Error(), "no request of a client is in flight") {
		t.Errorf("no call in flight: %v", err)
	}

	a1 := s.inFlight(wire.WithCaller(ctx, &fakeCaller{client: "A", caps: sampling}))
	a2 := s.inFlight(wire.WithCaller(ctx, &fakeCaller{client: "A", caps: sampling}))
	if res, err := relay(); err != nil || !strings.Contains(res, `"model":"A"`) {
		t.Errorf("two calls of one client: %s, %v", res, err)
	}
	b := s.inFlight(wire.WithCaller(ctx, &fakeCaller{client: "B", caps: sampling}))
	if _, err := relay(); err == nil || !strings.Contains(err.Error(), "several clients") {
		t.Errorf("calls of two clients: %v", err)
	}
	a1()
	a2()
	b()

	plain := s.inFlight(wire.WithCaller(ctx, &fakeCaller{client: "C", caps: &mcp.ClientCapabilities{}}))
	if _, err := relay(); err == nil || !strings.Contains(err.Error(), "did not declare the capability") {
		t.Errorf("a client without sampling: %v", err)
	}
	plain()

	c := &fakeCaller{client: "D"}
	done := s.inFlight(wire.WithCaller(ctx, c))
	s.relayLog(nil, &mcp.LoggingMessageParams{Level: "info", Data: "hello"})
	waitLogsWritten(t, s)
	done()
	if len(c.logs) != 1 || c.logs[0] != "conn: hello" {
		t.Errorf("log during the call: %v (want the connection's name as logger)", c.logs)
	}
}

// waitLogsWritten waits until s holds no log message for any client.
func waitLogsWritten(t *testing.T, s *Session) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.logs.mu.Lock()
		n := len(s.logs.m)
		s.logs.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log messages for %d clients still queued", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// blockingCaller is a client that answers sampling only when the request
// is cancelled (or, when stubborn, never until release).
type blockingCaller struct {
	fakeCaller
	entered  chan struct{}
	returned atomic.Bool
	stubborn bool
	release  chan struct{}
}

func (c *blockingCaller) CreateMessage(ctx context.Context, _ *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	close(c.entered)
	if c.stubborn {
		<-c.release
	} else {
		<-ctx.Done()
	}
	c.returned.Store(true)
	return nil, ctx.Err()
}

// TestRequestEndWaitsForItsRelays: the end of a request cancels what is
// still relayed for it and returns only once those relays have returned
// (the go-sdk tells the client of the cancellation on the request's own
// stream, which closes with the request's answer), at most relayDrain for
// a client that does not let go; a relay for an ended request is refused.
func TestRequestEndWaitsForItsRelays(t *testing.T) {
	s := &Session{name: "conn", log: slog.New(slog.DiscardHandler), red: newRedactor(nil, nil)}
	sampling := &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}
	for _, stubborn := range []bool{false, true} {
		c := &blockingCaller{fakeCaller: fakeCaller{client: "A", caps: sampling}, entered: make(chan struct{}),
			stubborn: stubborn, release: make(chan struct{})}
		end := s.inFlight(wire.WithCaller(context.Background(), c))
		relayed := make(chan error, 1)
		go func() {
			_, err := s.relayRequest(context.Background(), nil, methodCreateMessage, nil)
			relayed <- err
		}()
		<-c.entered
		start := time.Now()
		end()
		took := time.Since(start)
		if stubborn {
			if took < relayDrain {
				t.Errorf("a client that does not let go: the request ended after %s, before relayDrain %s", took, relayDrain)
			}
			close(c.release)
		} else if !c.returned.Load() {
			t.Error("the request ended before the relay it cancelled returned")
		}
		if err := <-relayed; err == nil || !strings.Contains(err.Error(), "did not answer sampling/createMessage in time") {
			t.Errorf("the server's answer for a cancelled relay: %v", err)
		}
	}
}
