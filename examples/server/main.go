// Command tether-example-server is a small MCP server of tether's own. The
// example manifests run it, so `make run` needs nothing from the network, and
// tests and benchmarks use it as a backend whose behaviour they know.
//
// It speaks MCP on stdin/stdout by default, or streamable HTTP at /mcp with
// -http ADDR. Its tools are echo, add, time, slow (progress and cancellation)
// and fail (a tool error). It logs to stderr only: in stdio mode stdout
// belongs to the protocol.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// version is set with -ldflags "-X main.version=…" by the Makefile.
var version = "v0.0.0-dev"

// logLevelEnv sets the default of -log-level, so a manifest can turn on debug
// logs through its env list.
const logLevelEnv = "EXAMPLE_SERVER_LOG_LEVEL"

// shutdownGrace bounds how long serveHTTP waits, once its context ends, for
// handlers to return; connections still open after it are closed.
const shutdownGrace = 5 * time.Second

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is main without the exit, so tests can drive it. stdout is used only by
// -version: in stdio mode the protocol owns the process's real stdout.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tether-example-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http", "", "serve streamable HTTP at `ADDR` (path /mcp) instead of stdin/stdout")
	logLevel := fs.String("log-level", envOr(logLevelEnv, "info"),
		"log level: debug, info, warn or error; $"+logLevelEnv+" sets the default")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %q\n", fs.Args())
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, "tether-example-server", version)
		return 0
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "bad -log-level: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	server := newServer(logger, time.Now)
	var err error
	if *httpAddr != "" {
		var ln net.Listener
		ln, err = net.Listen("tcp", *httpAddr)
		if err == nil {
			err = serveHTTP(ctx, ln, server, logger)
		}
	} else {
		err = server.Run(ctx, &mcp.StdioTransport{})
	}
	// A signal is the normal way to stop either mode; stdio also ends cleanly
	// when the client closes stdin.
	if err != nil && !errors.Is(err, context.Canceled) {
		logger.Error("server stopped", "error", err)
		return 1
	}
	return 0
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// serveHTTP serves server over streamable HTTP at /mcp on ln until ctx ends,
// then shuts down within shutdownGrace.
//
// Every request's context derives from ctx, so when ctx ends, in-flight calls
// (a slow tool) are cancelled and standalone SSE streams end, and Shutdown
// returns promptly instead of waiting for streams that never close by
// themselves.
func serveHTTP(ctx context.Context, ln net.Listener, server *mcp.Server, logger *slog.Logger) error {
	mux := http.NewServeMux()
	// One shared *mcp.Server for every session; the go-sdk's default DNS
	// rebinding protection stays on for loopback listeners.
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("serving streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp")

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	if serveErr := <-serveErr; !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return err
}
