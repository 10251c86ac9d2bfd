package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// asMainEnv makes the test binary behave as the server's main, so the stdio
// and signal tests run the real process without a separate build.
const asMainEnv = "TETHER_EXAMPLE_SERVER_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// waitLimit bounds every wait in these tests; a pass takes far less.
const waitLimit = 10 * time.Second

var fixedNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// logRecorder is a slog.Handler that hands each message to the test, so a test
// can wait for something the server did without sleeping.
type logRecorder struct{ msgs chan string }

func newLogRecorder() *logRecorder { return &logRecorder{msgs: make(chan string, 100)} }

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	select {
	case r.msgs <- rec.Message:
	default: // a test that does not read must not block the server
	}
	return nil
}

func (r *logRecorder) waitFor(t *testing.T, msg string) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		select {
		case got := <-r.msgs:
			if got == msg {
				return
			}
		case <-deadline:
			t.Fatalf("server did not log %q within %s", msg, waitLimit)
		}
	}
}

// connectInMemory connects a client to a fresh server over in-memory pipes.
func connectInMemory(t *testing.T, logs *logRecorder, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := t.Context()
	server := newServer(slog.New(logs), func() time.Time { return fixedNow })
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("want one content item, got %d: %+v", len(res.Content), res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("want text content, got %T", res.Content[0])
	}
	return tc.Text
}

func TestListTools(t *testing.T) {
	cs := connectInMemory(t, newLogRecorder(), nil)
	var names []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if want := []string{"add", "echo", "fail", "slow", "time"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
}

func TestCallTool(t *testing.T) {
	cs := connectInMemory(t, newLogRecorder(), nil)
	tests := []struct {
		tool       string
		args       map[string]any
		wantText   string
		wantError  bool
		wantStruct map[string]any // nil: no structured content expected
	}{
		{tool: "echo", args: map[string]any{"text": "hello, tether"}, wantText: "hello, tether"},
		{tool: "echo", args: map[string]any{"text": ""}, wantText: ""},
		{tool: "add", args: map[string]any{"a": 2, "b": 3.5}, wantText: "5.5", wantStruct: map[string]any{"sum": 5.5}},
		{tool: "add", args: map[string]any{"a": -1, "b": 1}, wantText: "0", wantStruct: map[string]any{"sum": 0.0}},
		{tool: "time", args: map[string]any{}, wantText: "2026-11-22T10:00:00Z",
			wantStruct: map[string]any{"time": "2026-11-22T10:00:00Z", "timezone": "UTC"}},
		{tool: "time", args: map[string]any{"timezone": "Europe/Paris"}, wantText: "2026-11-22T11:00:00+01:00",
			wantStruct: map[string]any{"time": "2026-11-22T11:00:00+01:00", "timezone": "Europe/Paris"}},
		{tool: "time", args: map[string]any{"timezone": "Mars/Olympus"}, wantText: `unknown time zone "Mars/Olympus"`, wantError: true},
		{tool: "slow", args: map[string]any{"seconds": 0, "steps": 3}, wantText: "done: 3 steps in 0s"},
		{tool: "slow", args: map[string]any{"seconds": 0.01}, wantText: "done: 10 steps in 10ms"},
		{tool: "slow", args: map[string]any{"seconds": 601}, wantText: "seconds must be between 0 and 600, got 601", wantError: true},
		{tool: "slow", args: map[string]any{"seconds": 1, "steps": 1001}, wantText: "steps must be between 1 and 1000, got 1001", wantError: true},
		{tool: "fail", args: map[string]any{"message": "no luck"}, wantText: "no luck", wantError: true},
		{tool: "fail", args: map[string]any{}, wantText: "failed, as asked", wantError: true},
	}
	for _, tt := range tests {
		args, _ := json.Marshal(tt.args)
		t.Run(tt.tool+string(args), func(t *testing.T) {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
			if err != nil {
				t.Fatalf("protocol error: %v", err)
			}
			if res.IsError != tt.wantError {
				t.Errorf("isError = %v, want %v", res.IsError, tt.wantError)
			}
			if got := text(t, res); got != tt.wantText {
				t.Errorf("text = %q, want %q", got, tt.wantText)
			}
			if tt.wantStruct == nil {
				if res.StructuredContent != nil {
					t.Errorf("unexpected structured content %v", res.StructuredContent)
				}
				return
			}
			var got map[string]any
			raw, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.wantStruct) {
				t.Errorf("structured content = %v, want %v", got, tt.wantStruct)
			}
		})
	}
}

func TestInvalidArgumentsAreRejected(t *testing.T) {
	cs := connectInMemory(t, newLogRecorder(), nil)
	for _, args := range []map[string]any{
		{},                    // echo's text is required
		{"text": 42},          // wrong type
		{"text": "x", "y": 1}, // unknown argument
	} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: args})
		if err == nil && !res.IsError {
			t.Errorf("echo %v: want an error, got %q", args, text(t, res))
		}
	}
}

func TestSlowReportsProgress(t *testing.T) {
	progress := make(chan *mcp.ProgressNotificationParams, 100)
	cs := connectInMemory(t, newLogRecorder(), &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- req.Params
		},
	})
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"seconds": 0.05, "steps": 5}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil || res.IsError {
		t.Fatalf("slow: err=%v result=%+v", err, res)
	}
	var got []*mcp.ProgressNotificationParams
	for len(got) < 5 {
		select {
		case p := <-progress:
			got = append(got, p)
		case <-time.After(waitLimit):
			t.Fatalf("got %d progress notifications, want 5", len(got))
		}
	}
	// The client may run notification handlers concurrently: order by value.
	slices.SortFunc(got, func(a, b *mcp.ProgressNotificationParams) int { return int(a.Progress - b.Progress) })
	for i, p := range got {
		if p.ProgressToken != "tok-1" || p.Progress != float64(i+1) || p.Total != 5 || p.Message == "" {
			t.Errorf("notification %d = {token %v, progress %v, total %v, message %q}, want {tok-1, %d, 5, non-empty}",
				i, p.ProgressToken, p.Progress, p.Total, p.Message, i+1)
		}
	}
	select {
	case p := <-progress:
		t.Errorf("unexpected extra notification %+v", p)
	default:
	}
}

func TestSlowWithoutTokenSendsNoProgress(t *testing.T) {
	got := make(chan struct{}, 10)
	cs := connectInMemory(t, newLogRecorder(), &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { got <- struct{}{} },
	})
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"seconds": 0, "steps": 3}})
	if err != nil || res.IsError {
		t.Fatalf("slow: err=%v result=%+v", err, res)
	}
	// A progress notification would have been sent before the result; the
	// echo round trip below flushes any handler still running.
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("got %d progress notifications without a progressToken", len(got))
	}
}

// TestSlowHonoursCancellation cancels a long call once it is running and
// checks that the server's handler stops, over each transport that carries
// notifications/cancelled.
func TestSlowHonoursCancellation(t *testing.T) {
	tests := []struct {
		name    string
		connect func(t *testing.T, logs *logRecorder, opts *mcp.ClientOptions) *mcp.ClientSession
	}{
		{"in-memory", connectInMemory},
		{"streamable-http", connectHTTP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := newLogRecorder()
			started := make(chan struct{}, 100)
			cs := tt.connect(t, logs, &mcp.ClientOptions{
				ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
					started <- struct{}{}
				},
			})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			callErr := make(chan error, 1)
			go func() {
				params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"seconds": 60, "steps": 600}}
				params.SetProgressToken("cancel-me")
				_, err := cs.CallTool(ctx, params)
				callErr <- err
			}()
			select {
			case <-started: // the handler is running
			case <-time.After(waitLimit):
				t.Fatal("no progress from the slow tool")
			}
			cancel()
			select {
			case err := <-callErr:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("CallTool error = %v, want context.Canceled", err)
				}
			case <-time.After(waitLimit):
				t.Fatal("CallTool did not return after cancel")
			}
			logs.waitFor(t, "slow call cancelled")
		})
	}
}

// connectHTTP serves a fresh server over streamable HTTP on a loopback port
// and connects a client to it.
func connectHTTP(t *testing.T, logs *logRecorder, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logger := slog.New(logs)
	served := make(chan error, 1)
	go func() { served <- serveHTTP(ctx, ln, newServer(logger, time.Now), logger) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, opts).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/mcp"}, nil)
	if err != nil {
		cancel()
		<-served
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("serveHTTP: %v", err)
			}
		case <-time.After(waitLimit):
			t.Errorf("serveHTTP did not return within %s of its context ending", waitLimit)
		}
	})
	return cs
}

func TestHTTPEcho(t *testing.T) {
	cs := connectHTTP(t, newLogRecorder(), nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over http"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "over http" {
		t.Errorf("echo = %q", got)
	}
}

// selfCommand runs this test binary as the server's main with args.
func selfCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	return cmd
}

func TestStdioProcess(t *testing.T) {
	cmd := selfCommand(t)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(t.Context(),
		&mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if got := cs.InitializeResult().ServerInfo.Name; got != "tether-example-server" {
		t.Errorf("server name = %q", got)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 40, "b": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "42" {
		t.Errorf("add = %q, want 42", got)
	}
	// Closing stdin is how a client ends a stdio server: it must exit 0 on
	// its own, before CommandTransport's grace period would send SIGTERM.
	start := time.Now()
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Exited() || cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("process state after close = %v, want exit status 0", cmd.ProcessState)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("server took %s to exit after stdin closed", d)
	}
}

var listeningRE = regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+/mcp)`)

func TestHTTPProcessStopsOnSIGTERM(t *testing.T) {
	cmd := selfCommand(t, "-http", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
				break
			}
		}
		io.Copy(io.Discard, stderr) // keep draining until the process exits
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})

	var url string
	select {
	case url = <-urls:
	case err := <-exited:
		t.Fatalf("server exited before listening: %v", err)
	case <-time.After(waitLimit):
		t.Fatal("server did not report its address")
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}

	// The client keeps a standalone SSE stream open; SIGTERM must still end
	// the server promptly and cleanly.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want status 0", err)
		}
	case <-time.After(shutdownGrace - time.Second):
		t.Fatalf("server still running %s after SIGTERM", shutdownGrace-time.Second)
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        string // value of EXAMPLE_SERVER_LOG_LEVEL
		wantCode   int
		wantStdout string
	}{
		{name: "version", args: []string{"-version"}, wantCode: 0, wantStdout: "tether-example-server v"},
		{name: "unknown flag", args: []string{"-no-such-flag"}, wantCode: 2},
		{name: "argument", args: []string{"extra"}, wantCode: 2},
		{name: "bad level", args: []string{"-log-level", "loud"}, wantCode: 2},
		{name: "bad level from env", env: "loud", wantCode: 2},
		{name: "flag wins over env", args: []string{"-log-level", "debug", "-http", "not an address"}, env: "loud", wantCode: 1},
		{name: "bad address", args: []string{"-http", "not an address"}, wantCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(logLevelEnv, tt.env)
			var stdout, stderr safeBuffer
			if got := run(tt.args, &stdout, &stderr); got != tt.wantCode {
				t.Errorf("run(%q) = %d, want %d; stderr:\n%s", tt.args, got, tt.wantCode, stderr.String())
			}
			if tt.wantStdout != "" && !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("run(%q) stdout = %q, want it to contain %q", tt.args, stdout.String(), tt.wantStdout)
			}
		})
	}
}

type safeBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// TestOnlyToolCallsAreLogged checks that a client's health checks leave
// stderr quiet (status files keep its tail) while tool calls are logged.
func TestOnlyToolCallsAreLogged(t *testing.T) {
	logs := newLogRecorder()
	cs := connectInMemory(t, logs, nil)
	if err := cs.Ping(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}
	// The server logs before it answers, so every message is in by now.
	var got []string
	for len(logs.msgs) > 0 {
		got = append(got, <-logs.msgs)
	}
	if want := []string{"tool call"}; !slices.Equal(got, want) {
		t.Errorf("log messages = %q, want %q", got, want)
	}
}
