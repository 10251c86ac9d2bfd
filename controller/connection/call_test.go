//go:build unix

package connection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// progressLog collects progress notifications from the call's goroutine.
type progressLog struct {
	mu    sync.Mutex
	got   []mcp.ProgressNotificationParams
	first chan struct{}
	once  sync.Once
}

func newProgressLog() *progressLog { return &progressLog{first: make(chan struct{})} }

func (l *progressLog) add(p *mcp.ProgressNotificationParams) {
	l.mu.Lock()
	l.got = append(l.got, *p)
	l.mu.Unlock()
	l.once.Do(func() { close(l.first) })
}

func (l *progressLog) list() []mcp.ProgressNotificationParams {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

func TestCallToolProgress(t *testing.T) {
	cases := []struct {
		name      string
		spec      func(t *testing.T) *spec.Spec
		tool      string
		args      any
		wantSteps []float64
		wantToken bool // the tool echoes the progress token it got
	}{
		{
			name: "npm-everything/stdio", spec: func(t *testing.T) *spec.Spec { return stdioSpec(npmEverything(t), "stdio") },
			tool: "trigger-long-running-operation", args: map[string]any{"duration": 0.4, "steps": 4},
			wantSteps: []float64{1, 2, 3, 4},
		},
		{
			name: "npm-everything/streamable", spec: func(t *testing.T) *spec.Spec {
				port := testport.Free(t)
				startHTTPPeer(t, port, []string{fmt.Sprintf("PORT=%d", port)}, npmEverything(t), "streamableHttp")
				return httpSpec(fmt.Sprintf("http://127.0.0.1:%d/mcp", port), "")
			},
			tool: "trigger-long-running-operation", args: map[string]any{"duration": 0.4, "steps": 4},
			wantSteps: []float64{1, 2, 3, 4},
		},
		{
			name: "go-everything/stdio", spec: func(t *testing.T) *spec.Spec { return stdioSpec(goEverything(t)) },
			tool: "test_tool_with_progress", wantSteps: []float64{0, 50, 100}, wantToken: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := connect(t, Request{Spec: tc.spec(t)})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			log := newProgressLog()
			// The caller's own _meta (its token, protocol keys) must not
			// travel upstream: an older server rejects them).
			p := &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args, Meta: mcp.Meta{
				"progressToken": "downstream-token",
				"io.modelcontextprotocol/protocolVersion": "2099-01-01",
			}}
			res, err := s.CallTool(ctx, p, log.add)
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			// Every notification was delivered before CallTool returned.
			got := log.list()
			var steps []float64
			for _, n := range got {
				steps = append(steps, n.Progress)
				if n.ProgressToken != nil {
					t.Errorf("progress handed over with token %v; the caller sets its own", n.ProgressToken)
				}
			}
			if !slices.Equal(steps, tc.wantSteps) {
				t.Errorf("progress steps = %v, want %v", steps, tc.wantSteps)
			}
			if tc.wantToken {
				if text := textOf(res); !strings.HasPrefix(text, "tether-") {
					t.Errorf("upstream saw progress token %q, want one of the session's own", text)
				}
			}
			if p.Meta["progressToken"] != "downstream-token" || len(p.Meta) != 2 {
				t.Errorf("caller's params were modified: %v", p.Meta)
			}
			// Without a progress callback, no token goes upstream at all.
			if tc.wantToken {
				res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Meta: mcp.Meta{"progressToken": "downstream-token"}}, nil)
				if err != nil {
					t.Fatalf("CallTool without progress: %v", err)
				}
				if text := textOf(res); text != "<nil>" {
					t.Errorf("upstream saw progress token %q without a progress callback", text)
				}
			}
		})
	}
}

// Cancelling a call's ctx returns at once and leaves the session usable.
func TestCallToolCancel(t *testing.T) {
	s := connect(t, Request{Spec: stdioSpec(npmEverything(t), "stdio")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := newProgressLog()
	type result struct {
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	var cancelledAt time.Time
	go func() {
		_, err := s.CallTool(ctx, &mcp.CallToolParams{
			Name:      "trigger-long-running-operation",
			Arguments: map[string]any{"duration": 30, "steps": 300},
		}, log.add)
		done <- result{err, time.Since(cancelledAt)}
	}()
	select {
	case <-log.first:
	case <-time.After(10 * time.Second):
		t.Fatal("no progress within 10s")
	}
	cancelledAt = time.Now()
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("CallTool did not return within 2s of cancel")
	}
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("CallTool error = %v, want context.Canceled", r.err)
	}
	if r.took > schedSlack {
		t.Errorf("CallTool returned %s after cancel", r.took)
	}
	probeCtx, probeCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer probeCancel()
	if err := s.Probe(probeCtx); err != nil {
		t.Errorf("Probe after a cancelled call: %v", err)
	}
	if s.Err() != nil {
		t.Errorf("session ended after a cancelled call: %v", s.Err())
	}
	t.Logf("CallTool returned %s after cancel", r.took.Round(time.Microsecond))
}

// Close while calls are in flight cancels them and stays bounded.
func TestCloseDuringCalls(t *testing.T) {
	s := connect(t, Request{Spec: stdioSpec(npmEverything(t), "stdio")})
	const calls = 4
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	started := newProgressLog()
	for range calls {
		wg.Go(func() {
			_, err := s.CallTool(context.Background(), &mcp.CallToolParams{
				Name:      "trigger-long-running-operation",
				Arguments: map[string]any{"duration": 30, "steps": 300},
			}, started.add)
			errs <- err
		})
	}
	select {
	case <-started.first:
	case <-time.After(10 * time.Second):
		t.Fatal("no progress within 10s")
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	took := time.Since(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("in-flight call ended with %v, want ErrClosed", err)
		}
	}
	if took > StopTimeout+schedSlack {
		t.Errorf("Close took %s with calls in flight", took)
	}
	if _, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo"}, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("CallTool after Close = %v, want ErrClosed", err)
	}
	t.Logf("Close with %d calls in flight took %s", calls, took.Round(time.Millisecond))
}

// notifications/tools/list_changed refreshes the tools and calls
// OnToolsChanged, on both protocol generations.
func TestToolsListChanged(t *testing.T) {
	cases := []struct {
		name string
		spec func(t *testing.T) *spec.Spec
	}{
		{"go-everything/stdio", func(t *testing.T) *spec.Spec { return stdioSpec(goEverything(t)) }},
		{"go-everything/streamable-stateless", func(t *testing.T) *spec.Spec {
			port := testport.Free(t)
			startHTTPPeer(t, port, nil, goEverything(t), fmt.Sprintf("-http=127.0.0.1:%d", port))
			return httpSpec(fmt.Sprintf("http://127.0.0.1:%d/mcp", port), "")
		}},
		{"go-everything/streamable-stateful", func(t *testing.T) *spec.Spec {
			port := testport.Free(t)
			startHTTPPeer(t, port, nil, goEverything(t), fmt.Sprintf("-http=127.0.0.1:%d", port), "-stateless=false")
			return httpSpec(fmt.Sprintf("http://127.0.0.1:%d/mcp", port), "")
		}},
	}
	const transient = "__transient_tool_for_list_changed"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			changed := make(chan struct{}, 10)
			s := connect(t, Request{Spec: tc.spec(t), OnToolsChanged: func() { changed <- struct{}{} }})
			hasTransient := func() bool {
				return slices.ContainsFunc(s.Tools(), func(tool *mcp.Tool) bool { return tool.Name == transient })
			}
			if hasTransient() {
				t.Fatalf("%s present before the trigger", transient)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "test_trigger_tool_change"}, nil); err != nil {
				t.Fatalf("trigger: %v", err)
			}
			select {
			case <-changed:
			case <-time.After(5 * time.Second):
				t.Fatalf("%s (%s): OnToolsChanged not called within 5s", tc.name, s.Server().ProtocolVersion)
			}
			if !hasTransient() {
				t.Errorf("%s missing after OnToolsChanged", transient)
			}
		})
	}
}
