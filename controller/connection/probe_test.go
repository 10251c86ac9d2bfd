//go:build unix

package connection

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// httpPeerCase starts one HTTP peer and returns its spec and process.
type httpPeerCase struct {
	name  string
	start func(t *testing.T) (*spec.Spec, *httpPeer)
}

func httpPeerCases() []httpPeerCase {
	return []httpPeerCase{
		{"npm-everything/streamable", func(t *testing.T) (*spec.Spec, *httpPeer) {
			port := testport.Free(t)
			p := startHTTPPeer(t, port, []string{fmt.Sprintf("PORT=%d", port)}, npmEverything(t), "streamableHttp")
			return httpSpec(fmt.Sprintf("http://127.0.0.1:%d/mcp", port), ""), p
		}},
		{"npm-everything/sse", func(t *testing.T) (*spec.Spec, *httpPeer) {
			port := testport.Free(t)
			p := startHTTPPeer(t, port, []string{fmt.Sprintf("PORT=%d", port)}, npmEverything(t), "sse")
			return httpSpec(fmt.Sprintf("http://127.0.0.1:%d/sse", port), spec.TransportSSE), p
		}},
		{"go-everything/streamable-stateless", func(t *testing.T) (*spec.Spec, *httpPeer) {
			port := testport.Free(t)
			p := startHTTPPeer(t, port, nil, goEverything(t), fmt.Sprintf("-http=127.0.0.1:%d", port))
			return httpSpec(fmt.Sprintf("http://127.0.0.1:%d/mcp", port), ""), p
		}},
		{"go-everything/streamable-stateful", func(t *testing.T) (*spec.Spec, *httpPeer) {
			port := testport.Free(t)
			p := startHTTPPeer(t, port, nil, goEverything(t), fmt.Sprintf("-http=127.0.0.1:%d", port), "-stateless=false")
			return httpSpec(fmt.Sprintf("http://127.0.0.1:%d/mcp", port), ""), p
		}},
	}
}

// probeWithin runs one probe under timeout and returns its error and how
// long it took.
func probeWithin(s *Session, timeout time.Duration) (took time.Duration, err error) {
	// start is taken before the deadline is set, so a probe that runs
	// into its deadline never measures less than timeout.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err = s.Probe(ctx)
	return time.Since(start), err
}

// A killed HTTP server must make Probe fail within its timeout (the go-sdk
// does not notice a dead HTTP server by itself).
func TestProbeFailsWhenHTTPServerKilled(t *testing.T) {
	const timeout = time.Second
	for _, tc := range httpPeerCases() {
		t.Run(tc.name, func(t *testing.T) {
			sp, p := tc.start(t)
			s := connect(t, Request{Spec: sp})
			if _, err := probeWithin(s, timeout); err != nil {
				t.Fatalf("Probe of a live server: %v", err)
			}
			p.kill(t)
			took, err := probeWithin(s, timeout)
			// A session that already noticed the death (SSE) fails at once.
			if err == nil {
				t.Fatal("Probe of a killed server succeeded")
			}
			if took > timeout+schedSlack {
				t.Errorf("Probe took %s, timeout %s", took, timeout)
			}
			t.Logf("%s (%s): probe after kill failed in %s: %v", tc.name, s.Server().ProtocolVersion, took.Round(time.Millisecond), err)
		})
	}
}

// A stopped (hung) server must make Probe time out, over stdio and HTTP,
// and the session must work again once the server continues.
func TestProbeTimesOutOnStoppedServer(t *testing.T) {
	const timeout = 300 * time.Millisecond
	cases := []struct {
		name  string
		start func(t *testing.T) (*spec.Spec, func(*Session) int)
	}{
		{"go-everything/stdio", func(t *testing.T) (*spec.Spec, func(*Session) int) {
			return stdioSpec(goEverything(t)), func(s *Session) int { return s.Process().PID }
		}},
		{"npm-everything/stdio", func(t *testing.T) (*spec.Spec, func(*Session) int) {
			return stdioSpec(npmEverything(t), "stdio"), func(s *Session) int { return s.Process().PID }
		}},
	}
	for _, hc := range httpPeerCases() {
		cases = append(cases, struct {
			name  string
			start func(t *testing.T) (*spec.Spec, func(*Session) int)
		}{hc.name, func(t *testing.T) (*spec.Spec, func(*Session) int) {
			sp, p := hc.start(t)
			return sp, func(*Session) int { return p.cmd.Process.Pid }
		}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp, pidOf := tc.start(t)
			s := connect(t, Request{Spec: sp})
			pid := pidOf(s)
			if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			cont := func() { _ = syscall.Kill(-pid, syscall.SIGCONT) }
			t.Cleanup(cont)
			waitGroupStopped(t, pid)
			took, err := probeWithin(s, timeout)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Probe of a stopped server = %v, want a deadline error", err)
			}
			if took < timeout || took > timeout+schedSlack {
				t.Errorf("Probe took %s, want about %s", took, timeout)
			}
			cont()
			if _, err := probeWithin(s, 5*time.Second); err != nil {
				t.Errorf("Probe after SIGCONT: %v", err)
			}
			t.Logf("%s (%s): probe of a stopped server failed after %s: %v", tc.name, s.Server().ProtocolVersion, took.Round(time.Millisecond), err)
		})
	}
}

// An HTTP server that restarts forgets the session: the next probe fails
// with mcp.ErrSessionMissing and the session ends, so that the reconciler
// reconnects at once. The go-sdk server answers 404; the npm server, as
// the TypeScript SDK's example does, 400 "No valid session ID provided".
func TestHTTPServerRestartEndsSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv func(t *testing.T, port int) ([]string, []string)
	}{
		{"go-everything/streamable-stateful", func(t *testing.T, port int) ([]string, []string) {
			return []string{goEverything(t), fmt.Sprintf("-http=127.0.0.1:%d", port), "-stateless=false"}, nil
		}},
		{"npm-everything/streamable", func(t *testing.T, port int) ([]string, []string) {
			return []string{npmEverything(t), "streamableHttp"}, []string{fmt.Sprintf("PORT=%d", port)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := testport.Free(t)
			argv, env := tc.argv(t, port)
			p := startHTTPPeer(t, port, env, argv...)
			s := connect(t, Request{Spec: httpSpec(fmt.Sprintf("http://127.0.0.1:%d/mcp", port), "")})
			p.kill(t)
			startHTTPPeer(t, port, env, argv...)
			if _, err := probeWithin(s, 5*time.Second); !errors.Is(err, mcp.ErrSessionMissing) {
				t.Fatalf("Probe of a session the restarted server does not know = %v, want mcp.ErrSessionMissing", err)
			}
			waitDone(t, s, 5*time.Second)
			t.Logf("session ended: %v", s.Err())
		})
	}
}
