//go:build unix

package connection

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// peerCase is one real server reachable over one transport.
type peerCase struct {
	name       string
	setup      func(t *testing.T) *spec.Spec
	serverName string
	tool       string // a tool that answers text without arguments
	args       any
	wantText   string
}

func peerCases() []peerCase {
	return []peerCase{
		{
			name:       "npm-everything/stdio",
			setup:      func(t *testing.T) *spec.Spec { return stdioSpec(npmEverything(t), "stdio") },
			serverName: "mcp-servers/everything",
			tool:       "echo", args: map[string]any{"message": "hi"}, wantText: "Echo: hi",
		},
		{
			name:       "go-everything/stdio",
			setup:      func(t *testing.T) *spec.Spec { return stdioSpec(goEverything(t)) },
			serverName: "mcp-conformance-test-server",
			tool:       "test_simple_text", wantText: "This is a simple text response for testing.",
		},
		{
			name: "npm-everything/streamable",
			setup: func(t *testing.T) *spec.Spec {
				port := testport.Free(t)
				startHTTPPeer(t, port, []string{fmt.Sprintf("PORT=%d", port)}, npmEverything(t), "streamableHttp")
				return httpSpec(fmt.Sprintf("http://127.0.0.1:%d/mcp", port), "")
			},
			serverName: "mcp-servers/everything",
			tool:       "echo", args: map[string]any{"message": "hi"}, wantText: "Echo: hi",
		},
		{
			name: "npm-everything/sse",
			setup: func(t *testing.T) *spec.Spec {
				port := testport.Free(t)
				startHTTPPeer(t, port, []string{fmt.Sprintf("PORT=%d", port)}, npmEverything(t), "sse")
				return httpSpec(fmt.Sprintf("http://127.0.0.1:%d/sse", port), spec.TransportSSE)
			},
			serverName: "mcp-servers/everything",
			tool:       "echo", args: map[string]any{"message": "hi"}, wantText: "Echo: hi",
		},
		{
			name: "go-everything/streamable-stateless",
			setup: func(t *testing.T) *spec.Spec {
				port := testport.Free(t)
				startHTTPPeer(t, port, nil, goEverything(t), fmt.Sprintf("-http=127.0.0.1:%d", port))
				return httpSpec(fmt.Sprintf("http://127.0.0.1:%d/mcp", port), spec.TransportStreamable)
			},
			serverName: "mcp-conformance-test-server",
			tool:       "test_simple_text", wantText: "This is a simple text response for testing.",
		},
		{
			name: "go-everything/streamable-stateful",
			setup: func(t *testing.T) *spec.Spec {
				port := testport.Free(t)
				startHTTPPeer(t, port, nil, goEverything(t), fmt.Sprintf("-http=127.0.0.1:%d", port), "-stateless=false")
				return httpSpec(fmt.Sprintf("http://127.0.0.1:%d/mcp", port), spec.TransportStreamable)
			},
			serverName: "mcp-conformance-test-server",
			tool:       "test_simple_text", wantText: "This is a simple text response for testing.",
		},
	}
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// TestPeers connects to every real peer over every transport it speaks,
// probes, calls a tool and closes, and reports the negotiated protocol and
// the probe's timing.
func TestPeers(t *testing.T) {
	for _, tc := range peerCases() {
		t.Run(tc.name, func(t *testing.T) {
			sp := tc.setup(t)
			start := time.Now()
			s := connect(t, Request{Spec: sp})
			connectTook := time.Since(start)

			info := s.Server()
			if info.Name != tc.serverName {
				t.Errorf("server name = %q, want %q", info.Name, tc.serverName)
			}
			if !slices.Contains(mcp.SupportedProtocolVersions(), info.ProtocolVersion) {
				t.Errorf("protocol version %q is not one the go-sdk supports", info.ProtocolVersion)
			}
			names := make([]string, 0, len(s.Tools()))
			for _, tool := range s.Tools() {
				names = append(names, tool.Name)
			}
			if !slices.Contains(names, tc.tool) {
				t.Fatalf("tools %v lack %q", names, tc.tool)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var probeTook time.Duration
			for range 3 {
				start := time.Now()
				if err := s.Probe(ctx); err != nil {
					t.Fatalf("Probe: %v", err)
				}
				probeTook = max(probeTook, time.Since(start))
			}
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args}, nil)
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if got := textOf(res); !strings.Contains(got, tc.wantText) {
				t.Errorf("CallTool text = %q, want it to contain %q", got, tc.wantText)
			}
			if err := s.Err(); err != nil {
				t.Errorf("Err of a live session = %v", err)
			}

			pst := s.Process()
			if (pst != nil) != (sp.Stdio != nil) {
				t.Errorf("Process() = %+v for stdio=%v", pst, sp.Stdio != nil)
			}
			start = time.Now()
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			closeTook := time.Since(start)
			if closeTook > StopTimeout+schedSlack {
				t.Errorf("Close took %s, bound is %s", closeTook, StopTimeout)
			}
			select {
			case <-s.Done():
			default:
				t.Error("Done not closed after Close")
			}
			if pst != nil {
				groupGone(t, pst.PID, time.Second)
			}
			t.Logf("%s: protocol %s, %d tools, connect %s, probe max %s (%s), close %s",
				tc.name, info.ProtocolVersion, len(names), connectTook.Round(time.Millisecond),
				probeTook.Round(10*time.Microsecond), probeMethod(info.ProtocolVersion), closeTook.Round(time.Millisecond))
		})
	}
}

func probeMethod(protocol string) string {
	if protocol >= protocol2026 {
		return "tools/list"
	}
	return "ping"
}
