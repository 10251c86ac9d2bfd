//go:build unix

package main

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// The gateway passes all of MCP through, not only tools: these tests run
// the real bin/tether in front of two real backends at once, the npm
// server-everything over stdio and the go-sdk everything-server over
// streamable HTTP, prefixes on, with a client that declares roots,
// sampling and elicitation and answers them.

const agentRoot = "file:///work/e2e-root"

// mcpAgent is a gateway client that declares roots, sampling and
// elicitation, answers them, and records what the gateway sends it.
type mcpAgent struct {
	cs      *mcp.ClientSession
	logs    chan *mcp.LoggingMessageParams
	updates chan string
	changed chan string // "prompts", "resources"
	// sampling, when set, replaces the agent's sampling answer.
	sampling func(context.Context) (*mcp.CreateMessageResult, error)
}

func connectAgent(t *testing.T, transport mcp.Transport, tweak func(*mcpAgent)) *mcpAgent {
	t.Helper()
	a := &mcpAgent{logs: make(chan *mcp.LoggingMessageParams, 256), updates: make(chan string, 64), changed: make(chan string, 256)}
	if tweak != nil {
		tweak(a)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			if a.sampling != nil {
				return a.sampling(ctx)
			}
			return &mcp.CreateMessageResult{Model: "e2e-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled by the agent"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada Lovelace", "username": "ada"}}, nil
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			select {
			case a.logs <- req.Params:
			default:
			}
		},
		ResourceUpdatedHandler:     func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { a.updates <- req.Params.URI },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { a.changed <- "prompts" },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { a.changed <- "resources" },
	})
	c.AddRoots(&mcp.Root{URI: agentRoot, Name: "e2e root"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, transport, classicOverHTTP(transport))
	if err != nil {
		t.Fatalf("connecting to the gateway: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	a.cs = cs
	return a
}

func (a *mcpAgent) names(t *testing.T) (tools, prompts, resources []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for tool, err := range a.cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		tools = append(tools, tool.Name)
	}
	for p, err := range a.cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatalf("prompts/list: %v", err)
		}
		prompts = append(prompts, p.Name)
	}
	for r, err := range a.cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		resources = append(resources, r.URI)
	}
	return tools, prompts, resources
}

// waitFor waits until the gateway lists every tool in want.
func (a *mcpAgent) waitFor(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tools, _, _ := a.names(t)
		if !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(tools, w) }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never listed %v; it lists %v", want, tools)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (a *mcpAgent) call(t *testing.T, ctx context.Context, name string, args map[string]any) string {
	t.Helper()
	res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: error result %q", name, textOf(res))
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// twoBackends writes the manifests of the two backends into dir and
// returns the go-sdk server's process.
func twoBackends(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	bin := builtBinaries(t)
	everything := npmPeer(t, "mcp-server-everything")
	goPort := testport.Free(t)
	goSrv := startServer(t, nil, filepath.Join(bin, "everything-server"), fmt.Sprintf("-http=127.0.0.1:%d", goPort), "-stateless=false")
	waitTCP(t, goPort, 20*time.Second)
	writeFile(t, filepath.Join(dir, "ev.yaml"), stdioManifest("ev", everything, []string{"stdio"}, ""))
	writeFile(t, filepath.Join(dir, "go.yaml"), httpManifest("go", fmt.Sprintf("http://127.0.0.1:%d/mcp", goPort), "streamable",
		fastHealth+"  callTimeout: 3s\n"))
	return goSrv
}

// passesThrough checks what both transports must carry: prompts and
// resources of both backends, sampling, elicitation and roots answered by
// the agent, log messages during a call.
func passesThrough(t *testing.T, a *mcpAgent) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a.waitFor(t, "ev_echo", "ev_trigger-sampling-request", "ev_trigger-elicitation-request", "ev_get-roots-list",
		"go_test_sampling", "go_test_elicitation", "go_test_tool_with_logging")

	t.Run("prompts listed and fetched by prefixed name", func(t *testing.T) {
		_, prompts, _ := a.names(t)
		for _, want := range []string{"ev_simple-prompt", "go_test_simple_prompt"} {
			if !slices.Contains(prompts, want) {
				t.Fatalf("prompts %v lack %s", prompts, want)
			}
			res, err := a.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: want})
			if err != nil || len(res.Messages) == 0 {
				t.Errorf("prompts/get %s = %+v, %v", want, res, err)
			}
		}
	})
	t.Run("resources of both read", func(t *testing.T) {
		_, _, resources := a.names(t)
		evURI := ""
		for _, r := range resources {
			if strings.HasPrefix(r, "demo://resource/static/") {
				evURI = r
				break
			}
		}
		if evURI == "" || !slices.Contains(resources, "test://static-text") {
			t.Fatalf("resources %v lack server-everything's or everything-server's", resources)
		}
		for _, uri := range []string{evURI, "test://static-text"} {
			res, err := a.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err != nil || len(res.Contents) == 0 || res.Contents[0].URI != uri {
				t.Errorf("resources/read %s = %+v, %v", uri, res, err)
			}
		}
	})
	t.Run("sampling answered by the agent", func(t *testing.T) {
		if got := a.call(t, ctx, "ev_trigger-sampling-request", map[string]any{"prompt": "hello"}); !strings.Contains(got, "sampled by the agent") {
			t.Errorf("ev_trigger-sampling-request = %q", got)
		}
		if got := a.call(t, ctx, "go_test_sampling", map[string]any{"prompt": "hello"}); got != "LLM response: sampled by the agent" {
			t.Errorf("go_test_sampling = %q", got)
		}
	})
	t.Run("elicitation answered by the agent", func(t *testing.T) {
		if got := a.call(t, ctx, "ev_trigger-elicitation-request", map[string]any{}); !strings.Contains(got, "Ada Lovelace") {
			t.Errorf("ev_trigger-elicitation-request = %q", got)
		}
		if got := a.call(t, ctx, "go_test_elicitation", map[string]any{"message": "who?"}); !strings.Contains(got, "action=accept") || !strings.Contains(got, "ada") {
			t.Errorf("go_test_elicitation = %q", got)
		}
	})
	t.Run("roots of the agent seen by the backend", func(t *testing.T) {
		if got := a.call(t, ctx, "ev_get-roots-list", map[string]any{}); !strings.Contains(got, agentRoot) {
			t.Errorf("ev_get-roots-list = %q", got)
		}
	})
	t.Run("log messages during a call", func(t *testing.T) {
		if err := a.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
		// A client of the 2026-07-28 protocol (the go-sdk's over stdio)
		// sends its level with each request; one of the classic protocol
		// set it above.
		p := &mcp.CallToolParams{Name: "go_test_tool_with_logging", Arguments: map[string]any{}}
		p.Meta = mcp.Meta{mcp.MetaKeyLogLevel: "info"}
		if _, err := a.cs.CallTool(ctx, p); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case lm := <-a.logs:
				if lm.Data == "Tool execution started" {
					if lm.Logger != "go" || lm.Level != "info" {
						t.Errorf("log message %+v: want level info, logger go (the connection's name)", lm)
					}
					return
				}
			case <-ctx.Done():
				t.Fatal("no log message of the call reached the agent")
			}
		}
	})
}

// TestGatewayPassesMCPThrough: over streamable HTTP, everything of MCP
// passes through, and the bad cases get clear MCP errors.
func TestGatewayPassesMCPThrough(t *testing.T) {
	dir := t.TempDir()
	goSrv := twoBackends(t, dir)
	gwPort := testport.Free(t)
	tt := startTether(t, dir, "--listen", fmt.Sprintf("127.0.0.1:%d", gwPort))
	waitTCP(t, gwPort, 20*time.Second)
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", gwPort)

	// A backend request with no call behind it: server-everything asks for
	// roots 350 ms after it initialized, before anyone calls it. tether
	// refuses (the server logs the failure on its stderr) and says so in
	// its own log.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(tt.logs.String(), `msg="server request not relayed" connection=ev method=roots/list reason="no request of a client is in flight`) {
		if time.Now().After(deadline) {
			t.Fatal("no refused roots/list in tether's log")
		}
		time.Sleep(50 * time.Millisecond)
	}

	a := connectAgent(t, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	passesThrough(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("subscribe, update, unsubscribe", func(t *testing.T) {
		// The everything-server updates test://watched-resource every 3s.
		if err := a.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
			t.Fatal(err)
		}
		select {
		case uri := <-a.updates:
			if uri != "test://watched-resource" {
				t.Errorf("update for %q", uri)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("no notifications/resources/updated reached the subscribed agent")
		}
		if err := a.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://watched-resource"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a URI nobody owns", func(t *testing.T) {
		_, err := a.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://nobody-has-this"})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != mcp.CodeResourceNotFound {
			t.Errorf("read of an unknown URI: %v, want code %d", err, mcp.CodeResourceNotFound)
		}
	})
	t.Run("a backend over SSE", func(t *testing.T) {
		// server-everything over the legacy SSE transport: prompts and a
		// sampling request relayed the same way.
		ssePort := testport.Free(t)
		startServer(t, []string{fmt.Sprintf("PORT=%d", ssePort)}, npmPeer(t, "mcp-server-everything"), "sse")
		waitTCP(t, ssePort, 20*time.Second)
		writeFile(t, filepath.Join(dir, "evs.yaml"), httpManifest("evs", fmt.Sprintf("http://127.0.0.1:%d/sse", ssePort), "sse", ""))
		a.waitFor(t, "evs_trigger-sampling-request")
		if _, err := a.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "evs_simple-prompt"}); err != nil {
			t.Errorf("prompts/get evs_simple-prompt: %v", err)
		}
		if got := a.call(t, ctx, "evs_trigger-sampling-request", map[string]any{"prompt": "over sse"}); !strings.Contains(got, "sampled by the agent") {
			t.Errorf("evs_trigger-sampling-request = %q", got)
		}
	})
	t.Run("a client that never answers sampling", func(t *testing.T) {
		cancelled, giveUp := make(chan struct{}), make(chan struct{})
		mute := connectAgent(t, &mcp.StreamableClientTransport{Endpoint: url}, func(m *mcpAgent) {
			m.sampling = func(ctx context.Context) (*mcp.CreateMessageResult, error) {
				select {
				case <-ctx.Done():
					close(cancelled)
					return nil, ctx.Err()
				case <-giveUp: // a failed test: the agent's Close waits for this handler
					return nil, errors.New("the test ended")
				}
			}
		})
		t.Cleanup(func() { close(giveUp) }) // runs before the agent's Close
		start := time.Now()
		_, err := mute.cs.CallTool(ctx, &mcp.CallToolParams{Name: "go_test_sampling", Arguments: map[string]any{"prompt": "hi"}})
		if err == nil || !strings.Contains(err.Error(), "timed out after 3s (callTimeout of connection go)") {
			t.Fatalf("call whose client never answers: %v", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the call took %v with callTimeout 3s", d)
		}
		select {
		case <-cancelled:
		case <-ctx.Done():
			t.Fatal("the agent's sampling request was never cancelled")
		}
		// Nothing is stuck: the next call of the same client works.
		if got := mute.call(t, ctx, "go_test_simple_text", map[string]any{}); got == "" {
			t.Error("no answer after the timeout")
		}
	})
	t.Run("a connection that goes away", func(t *testing.T) {
		for len(a.changed) > 0 {
			<-a.changed
		}
		_ = syscall.Kill(-goSrv.Process.Pid, syscall.SIGKILL)
		waitStatus(t, filepath.Join(dir, "go.yaml"), "go", 30*time.Second, "Reconnecting", phaseIs(spec.PhaseReconnecting))
		want := map[string]bool{"prompts": true, "resources": true}
		for len(want) > 0 {
			select {
			case what := <-a.changed:
				delete(want, what)
			case <-ctx.Done():
				t.Fatalf("no list_changed for %v", want)
			}
		}
		_, prompts, resources := a.names(t)
		if slices.Contains(prompts, "go_test_simple_prompt") || slices.Contains(resources, "test://static-text") {
			t.Errorf("go's prompts or resources still listed: %v %v", prompts, resources)
		}
		_, err := a.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "go_test_simple_prompt"})
		if err == nil || !strings.Contains(err.Error(), "connection go is not connected") {
			t.Errorf("prompt of a Reconnecting connection: %v", err)
		}
	})
}

// TestGatewayPassesMCPThroughStdio: the same through `tether run --stdio`.
func TestGatewayPassesMCPThroughStdio(t *testing.T) {
	dir := t.TempDir()
	twoBackends(t, dir)
	cmd := exec.Command(filepath.Join(builtBinaries(t), "tether"), "run", "--stdio", "--dir", dir, "--metrics-addr", "", "--log-level", "debug")
	logs := &syncBuffer{}
	cmd.Stderr = logs
	cmd.Env = os.Environ()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("tether logs:\n%s", logs.String())
		}
	})
	a := connectAgent(t, &mcp.CommandTransport{Command: cmd}, nil)
	passesThrough(t, a)
}
