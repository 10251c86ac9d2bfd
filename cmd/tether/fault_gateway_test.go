//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// post sends one raw request to the gateway.
func post(t *testing.T, url string, body []byte, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	return resp.StatusCode, readAll(resp.Body)
}

// cutCalls is an http.RoundTripper that can drop the connection of every
// tools/call in flight, the way a client that dies or loses its network
// does: no notifications/cancelled is sent, the request just ends.
type cutCalls struct {
	mu   sync.Mutex
	cuts []context.CancelFunc
}

func (c *cutCalls) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.GetBody != nil {
		if b, err := r.GetBody(); err == nil {
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(b)
			if bytes.Contains(buf.Bytes(), []byte(`"tools/call"`)) {
				ctx, cancel := context.WithCancel(r.Context())
				c.mu.Lock()
				c.cuts = append(c.cuts, cancel)
				c.mu.Unlock()
				r = r.WithContext(ctx)
			}
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (c *cutCalls) cut() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.cuts {
		cancel()
	}
	n := len(c.cuts)
	c.cuts = nil
	return n
}

// TestFaultGateway: what clients can do to the gateway, and what backends can
// do to calls in flight (docs/reliability.md, rows G1–G6).
func TestFaultGateway(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	dir := t.TempDir()
	m := filepath.Join(dir, "be.yaml")
	// A short interval puts the backend's stderr into status quickly; the
	// default timeout keeps a backend busy with 1,000 calls from being taken
	// for dead (its pings queue behind the calls).
	writeFile(t, m, faultManifest(t, "be", nil, "  healthCheck: {interval: 200ms}\n"+quickBackoff))
	tt, ep := startTetherServing(t, dir)
	waitStatus(t, m, "be", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))

	t.Run("G1 malformed JSON-RPC", func(t *testing.T) {
		bodies := []struct{ name, body string }{
			{"truncated", `{"jsonrpc":"2.0","id":1,"method":"initialize"`},
			{"null", `null`},
			{"empty batch", `[]`},
			{"a number", `42`},
			{"no method", `{"jsonrpc":"2.0","id":1}`},
			{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"ping"}`},
			{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`},
			{"params not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}`},
			{"call without a session", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"be_echo"}}`},
			{"binary", "\x00\x01\x02\xff\xfe"},
			{"deep nesting", strings.Repeat("[", 100000) + strings.Repeat("]", 100000)},
			{"invalid UTF-8 in a string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}"},
		}
		// Each is refused (4xx), answered with a JSON-RPC error, or, for what
		// reads as a response (an id without a method), accepted with 202 as
		// a message that wants no answer. Never a 5xx, never a hang.
		for _, b := range bodies {
			code, body := post(t, ep.gateway, []byte(b.body), nil)
			switch {
			case code >= 400 && code < 500:
			case code == http.StatusOK && strings.Contains(body, `"error"`):
			case code == http.StatusAccepted && b.name == "no method":
			default:
				t.Errorf("%s: status %d: %.200s", b.name, code, body)
			}
		}
	})

	t.Run("G2 oversized body", func(t *testing.T) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"%s"}}`, strings.Repeat("x", 5<<20))
		code, _ := post(t, ep.gateway, []byte(body), nil)
		if code != http.StatusRequestEntityTooLarge {
			t.Errorf("a 5 MiB body: status %d, want 413", code)
		}
	})

	t.Run("G3 unknown session id", func(t *testing.T) {
		code, body := post(t, ep.gateway, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`),
			map[string]string{"Mcp-Session-Id": "no-such-session", "Mcp-Protocol-Version": "2025-06-18"})
		if code != http.StatusNotFound {
			t.Errorf("unknown session: status %d, want 404: %.200s", code, body)
		}
	})

	t.Run("the gateway still serves", func(t *testing.T) {
		s := connectClient(t, ep)
		res, err := call(s, 10*time.Second, "be_echo", map[string]any{"text": "still here"})
		if err != nil || textOf(res) != "still here" {
			t.Fatalf("be_echo after the junk = %v, %v", res, err)
		}
	})

	t.Run("G4 1000 concurrent calls", func(t *testing.T) {
		s := connectClient(t, ep)
		const n = 1000
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				want := fmt.Sprintf("call %d", i)
				res, err := call(s, 60*time.Second, "be_echo", map[string]any{"text": want})
				switch {
				case err != nil:
					errs <- err
				case textOf(res) != want:
					errs <- fmt.Errorf("answer %q to %q", textOf(res), want)
				}
			}()
		}
		wg.Wait()
		close(errs)
		failed := 0
		for err := range errs {
			if failed++; failed <= 3 {
				t.Errorf("call failed: %v", err)
			}
		}
		if failed > 0 {
			t.Errorf("%d of %d concurrent calls failed", failed, n)
		}
		t.Logf("%d concurrent calls took %v", n, time.Since(start).Round(time.Millisecond))
	})

	t.Run("G5 client disconnects mid-call", func(t *testing.T) {
		cuts := &cutCalls{}
		gc := connectGateway(t, &mcp.StreamableClientTransport{Endpoint: ep.gateway, HTTPClient: &http.Client{Transport: cuts}})
		errc := make(chan error, 1)
		go func() {
			_, err := call(gc.session, 60*time.Second, "be_slow", map[string]any{"seconds": 60, "id": "cut"})
			errc <- err
		}()
		waitStatus(t, m, "be", 10*time.Second, "the call running in the backend", func(st spec.ConnectionStatus) bool {
			return st.Process != nil && slices.Contains(st.Process.StderrTail, "slow call cut started")
		})
		if n := cuts.cut(); n != 1 {
			t.Fatalf("cut %d calls, want 1", n)
		}
		if err := <-errc; err == nil {
			t.Fatalf("a cut call answered")
		}
		start := time.Now()
		waitStatus(t, m, "be", 10*time.Second, "the backend seeing the cancellation", func(st spec.ConnectionStatus) bool {
			return st.Process != nil && slices.Contains(st.Process.StderrTail, "slow call cancelled")
		})
		t.Logf("the backend call was cancelled %v after the client went", time.Since(start).Round(time.Millisecond))
		// The gateway records the call canceled (it is recorded once the
		// backend call returned, so it may trail the backend's line).
		series := `tether_gateway_tool_calls_total{connection="be",result="canceled"}`
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if v, _ := metricValue(scrape(t, ep), series); v == 1 {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("%s = %v, want 1", series, v)
			}
		}
	})

	t.Run("G6 backend dies mid-call", func(t *testing.T) {
		s := connectClient(t, ep)
		for _, how := range []string{"crashes", "is killed"} {
			st := waitStatus(t, m, "be", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
			start := time.Now()
			var err error
			if how == "crashes" {
				_, err = call(s, 30*time.Second, "be_crash", nil)
			} else {
				errc := make(chan error, 1)
				go func() {
					_, err := call(s, 60*time.Second, "be_slow", map[string]any{"seconds": 60, "id": "killed"})
					errc <- err
				}()
				waitStatus(t, m, "be", 10*time.Second, "the call running in the backend", func(st spec.ConnectionStatus) bool {
					return st.Process != nil && slices.Contains(st.Process.StderrTail, "slow call killed started")
				})
				start = time.Now()
				must(t, syscall.Kill(st.Process.PID, syscall.SIGKILL))
				err = <-errc
			}
			took := time.Since(start)
			var je *jsonrpc.Error
			if err == nil || !errors.As(err, &je) || !strings.Contains(je.Message, "be") {
				t.Errorf("backend %s mid-call: %v, want an MCP error naming the connection", how, err)
			}
			if took > 3*time.Second {
				t.Errorf("backend %s mid-call: the call took %v to fail", how, took)
			}
			t.Logf("backend %s mid-call: failed after %v: %v", how, took.Round(time.Millisecond), err)
			waitStatus(t, m, "be", 15*time.Second, "Connected to a new child", func(st2 spec.ConnectionStatus) bool {
				return st2.Phase == spec.PhaseConnected && st2.Process.PID != st.Process.PID
			})
		}
		res, err := call(s, 10*time.Second, "be_echo", map[string]any{"text": "back"})
		if err != nil || textOf(res) != "back" {
			t.Errorf("be_echo after the backend came back = %v, %v", res, err)
		}
	})

	t.Run("tether logged no error of its own", func(t *testing.T) {
		for _, line := range strings.Split(tt.logs.String(), "\n") {
			// The go-sdk logs a client's protocol violations at ERROR
			// (component=mcp-sdk); those are the client's, not tether's.
			if strings.Contains(line, "level=ERROR") && !strings.Contains(line, "component=mcp-sdk") {
				t.Errorf("%s", line)
			}
		}
	})
}
