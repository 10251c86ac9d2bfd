// Command faultserver is an MCP server that misbehaves on request, for
// tether's fault tests (cmd/tether/fault_*_test.go). It speaks real MCP (the
// go-sdk's server) over stdio, or streamable HTTP with -http, so that a test
// can make it fail at a chosen point: before initialize, after it, in the
// middle of a call.
//
// It lives under testdata so that `go build ./...` and `go vet ./...` leave
// it alone; the tests build it explicitly.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() { os.Exit(run()) }

type options struct {
	exitAtStart    int           // exit with this code before reading stdin (-1: no)
	stopAtStart    bool          // SIGSTOP itself before reading stdin
	banner         string        // a line on stdout before serving
	junkAfter      time.Duration // a non-JSON line on stdout this long after start
	exitAfter      time.Duration // exit this long after start
	exitCode       int           // with exitAfter
	stderrBytes    int           // write this much to stderr (in lines) before serving
	stderrLine     string        // then this line on stderr
	tools          int           // extra tools t00000… beyond the fixed set
	printEnv       string        // print the value of this variable on stderr at start
	printEncoded   string        // print this variable base64- and URL-encoded on stderr at start
	httpAddr       string        // serve streamable HTTP on this address instead of stdio
	initDelay      time.Duration // delay the answer to initialize
	ignoreStdinEOF bool          // keep running after stdin closes (a stubborn server)
	logFlood       int           // once initialized, send log messages of this many bytes, one a millisecond
	logsTool       bool          // serve the logs tool
	out            *lockedWriter // stdout, over stdio (the stall tool writes there)
}

func run() int {
	var o options
	flag.IntVar(&o.exitAtStart, "exit-at-start", -1, "exit with `CODE` before serving")
	flag.BoolVar(&o.stopAtStart, "stop-at-start", false, "SIGSTOP itself before serving (hang before initialize)")
	flag.StringVar(&o.banner, "banner", "", "print `TEXT` on stdout before serving")
	flag.DurationVar(&o.junkAfter, "junk-after", 0, "print a non-JSON line on stdout after `DURATION`")
	flag.DurationVar(&o.exitAfter, "exit-after", 0, "exit after `DURATION` of serving")
	flag.IntVar(&o.exitCode, "exit-code", 0, "exit code for -exit-after")
	flag.IntVar(&o.stderrBytes, "stderr-bytes", 0, "write `N` bytes to stderr before serving")
	flag.StringVar(&o.stderrLine, "stderr-line", "", "then write `LINE` to stderr")
	flag.IntVar(&o.tools, "tools", 0, "serve `N` extra tools")
	flag.StringVar(&o.printEnv, "print-env", "", "print the value of environment variable `NAME` on stderr")
	flag.StringVar(&o.printEncoded, "print-encoded", "", "print the value of environment variable `NAME` base64- and URL-encoded on stderr")
	flag.StringVar(&o.httpAddr, "http", "", "serve streamable HTTP at `ADDR`/mcp")
	flag.DurationVar(&o.initDelay, "init-delay", 0, "answer initialize after `DURATION`")
	flag.BoolVar(&o.ignoreStdinEOF, "ignore-stdin-eof", false, "keep running after stdin closes")
	flag.BoolVar(&o.logsTool, "logs-tool", false, "serve the logs tool")
	flag.IntVar(&o.logFlood, "log-flood", 0, "once initialized, send log messages of `N` bytes, one a millisecond (at the level the client set)")
	flag.Parse()

	if o.printEnv != "" {
		fmt.Fprintf(os.Stderr, "starting with %s=%s\n", o.printEnv, os.Getenv(o.printEnv))
	}
	if v := os.Getenv(o.printEncoded); o.printEncoded != "" {
		fmt.Fprintf(os.Stderr, "base64: %s base64url: %s raw: %s rawurl: %s\n",
			base64.StdEncoding.EncodeToString([]byte(v)), base64.URLEncoding.EncodeToString([]byte(v)),
			base64.RawStdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)))
		fmt.Fprintf(os.Stderr, "callback: https://example.com/cb?token=%s and /files/%s\n", url.QueryEscape(v), url.PathEscape(v))
	}
	if o.exitAtStart >= 0 {
		fmt.Fprintf(os.Stderr, "fatal: cannot start (exit %d)\n", o.exitAtStart)
		return o.exitAtStart
	}
	if o.stopAtStart {
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	}
	if o.stderrBytes > 0 {
		line := strings.Repeat("x", 1023) + "\n"
		for n := 0; n < o.stderrBytes; n += len(line) {
			if _, err := io.WriteString(os.Stderr, line); err != nil {
				return 1
			}
		}
	}
	if o.stderrLine != "" {
		fmt.Fprintln(os.Stderr, o.stderrLine)
	}
	if o.banner != "" {
		fmt.Fprintln(os.Stdout, o.banner)
	}
	if o.exitAfter > 0 {
		time.AfterFunc(o.exitAfter, func() {
			fmt.Fprintf(os.Stderr, "exiting with %d as asked\n", o.exitCode)
			os.Exit(o.exitCode)
		})
	}

	out := &lockedWriter{w: os.Stdout}
	if o.httpAddr == "" {
		o.out = out
	}
	server := newServer(&o)
	if o.httpAddr != "" {
		ln, err := net.Listen("tcp", o.httpAddr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
		mux := http.NewServeMux()
		mux.Handle("/mcp", h)
		if err := http.Serve(ln, mux); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}

	if o.junkAfter > 0 {
		time.AfterFunc(o.junkAfter, func() { out.junk("this is not JSON-RPC") })
	}
	err := server.Run(context.Background(), &mcp.IOTransport{Reader: os.Stdin, Writer: out})
	fmt.Fprintf(os.Stderr, "session ended: %v\n", err)
	if o.ignoreStdinEOF {
		select {} // a server that does not notice its client left
	}
	return 0
}

// lockedWriter lets a junk line go out between two protocol messages,
// never inside one.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }

func (l *lockedWriter) junk(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.w, s)
}

var objectSchema = json.RawMessage(`{"type":"object"}`)

func newServer(o *options) *mcp.Server {
	var sopts *mcp.ServerOptions
	if o.logFlood > 0 {
		msg := strings.Repeat("f", o.logFlood)
		sopts = &mcp.ServerOptions{
			// A classic protocol: logging/setLevel sets what it sends
			// outside any request.
			SupportedProtocolVersions: []string{"2025-11-25"},
			InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
				go func() {
					for {
						if err := req.Session.Log(context.Background(), &mcp.LoggingMessageParams{Level: "info", Data: msg}); err != nil {
							return
						}
						time.Sleep(time.Millisecond)
					}
				}()
			}}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "faultserver", Version: "1.0.0"}, sopts)
	if o.initDelay > 0 {
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "initialize" || method == "server/discover" {
					time.Sleep(o.initDelay)
				}
				return next(ctx, method, req)
			}
		})
	}
	// After the stall tool, the server answers no request but keeps
	// talking: a hung server whose notifications still flow.
	var stalled atomic.Bool
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if stalled.Load() && !strings.HasPrefix(method, "notifications/") {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return next(ctx, method, req)
		}
	})
	add := func(name, desc string, h mcp.ToolHandler) {
		s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: objectSchema}, h)
	}
	add("echo", "answers its text argument", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Text string }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		return text(a.Text), nil
	})
	add("slow", "sleeps for its seconds argument; logs its cancellation", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			Seconds float64
			ID      string
		}
		_ = json.Unmarshal(req.Params.Arguments, &a)
		fmt.Fprintf(os.Stderr, "slow call %s started\n", a.ID)
		select {
		case <-time.After(time.Duration(a.Seconds * float64(time.Second))):
			return text("done"), nil
		case <-ctx.Done():
			fmt.Fprintln(os.Stderr, "slow call cancelled")
			return nil, ctx.Err()
		}
	})
	if o.logsTool {
		add("logs", "sends its count argument of log messages (info) of its bytes argument each, then answers", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Count, Bytes int }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			for i := range a.Count {
				data := fmt.Sprintf("%d:%s", i, strings.Repeat("l", a.Bytes))
				if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "faultserver", Data: data}); err != nil {
					return nil, err
				}
			}
			return text("logged"), nil
		})
	}
	add("big", "answers a text of its bytes argument", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Bytes int }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		return text(strings.Repeat("b", a.Bytes)), nil
	})
	add("stall", "stops answering requests (this one too) and sends notifications/message and progress for a token no call carries every 50 ms, and progress for this call while it lasts, over stdio", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if o.out == nil {
			return nil, fmt.Errorf("stall works over stdio only")
		}
		if stalled.CompareAndSwap(false, true) {
			fmt.Fprintln(os.Stderr, "stalled: answering nothing from now on")
			go func() {
				for {
					time.Sleep(50 * time.Millisecond)
					o.out.junk(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"faultserver","data":"still talking"}}`)
					// tether's tokens count from tether-1.
					o.out.junk(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tether-0","progress":1}}`)
				}
			}()
		}
		if tok := req.Params.GetProgressToken(); tok != nil {
			// Progress for the call tether waits on: it proves the server
			// alive only until the call's callTimeout.
			b, _ := json.Marshal(tok)
			for i := 1; ; i++ {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(50 * time.Millisecond):
				}
				o.out.junk(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d}}`, b, i))
			}
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	add("crash", "exits the process in the middle of the call", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "crashing mid-call")
		os.Exit(7)
		return nil, nil
	})
	// The leak tools repeat the value of an environment variable (a secret
	// the manifest passed) in every channel a server has back to tether.
	add("leak_error", "a tool error that carries the secret", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		v := os.Getenv(argName(req))
		fmt.Fprintf(os.Stderr, "leaking %s on stderr\n", v)
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "bad credentials: " + v}}}, nil
	})
	add("leak_rpc", "a JSON-RPC error that carries the secret", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		v := os.Getenv(argName(req))
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "token " + v + " rejected"}
	})
	add("leak_exit", "prints the secret on stderr and exits", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		fmt.Fprintf(os.Stderr, "panic: auth failed for token %s", os.Getenv(argName(req))) // no newline: a crash's last words
		os.Exit(2)
		return nil, nil
	})
	for i := range o.tools {
		name := fmt.Sprintf("t%05d", i)
		add(name, "tool number "+name, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(name), nil
		})
	}
	return s
}

func argName(req *mcp.CallToolRequest) string {
	var a struct{ Name string }
	_ = json.Unmarshal(req.Params.Arguments, &a)
	return a.Name
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
