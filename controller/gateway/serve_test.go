package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// post sends one JSON-RPC POST to url and returns the status code.
func post(t *testing.T, url, host, auth string, body io.Reader) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if host != "" {
		req.Host = host
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// serveOn runs ServeListener in the background and returns the endpoint URL
// (always via 127.0.0.1) and a stop function that waits for Serve's answer.
func serveOn(t *testing.T, g *Gateway, bind, tokenFile string) (url string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- g.ServeListener(ctx, ln, tokenFile) }()
	stopped := false
	var result error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-errc
		}
		return result
	}
	t.Cleanup(func() { stop() })
	return fmt.Sprintf("http://127.0.0.1:%d%s", port, Path), stop
}

func writeToken(t *testing.T, token string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestForeignHostRefused(t *testing.T) {
	g := New(Options{Logger: testLogger(t)})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	tests := []struct {
		host string
		want int
	}{
		{host: "evil.example", want: http.StatusForbidden},
		{host: "evil.example:8808", want: http.StatusForbidden},
		{host: "localhost:8808", want: http.StatusOK},
		{host: "", want: http.StatusOK}, // 127.0.0.1:port
	}
	for _, tt := range tests {
		if got := post(t, url, tt.host, "", strings.NewReader(initializeBody)); got != tt.want {
			t.Errorf("Host %q: status %d, want %d", tt.host, got, tt.want)
		}
	}
}

func TestNonLoopbackNeedsToken(t *testing.T) {
	g := New(Options{Logger: testLogger(t)})
	tests := []struct {
		addr    string
		token   string
		wantErr string
	}{
		{addr: "0.0.0.0:0", wantErr: "refusing to listen on non-loopback address"},
		{addr: ":0", wantErr: "refusing to listen on non-loopback address"},
		{addr: "[::]:0", wantErr: "refusing to listen on non-loopback address"},
		{addr: "0.0.0.0:0", token: writeToken(t, "  "), wantErr: "is empty"},
		{addr: "0.0.0.0:0", token: filepath.Join(t.TempDir(), "missing"), wantErr: "auth token file"},
		{addr: "127.0.0.1:0"},
		{addr: "localhost:0"},
		{addr: "0.0.0.0:0", token: writeToken(t, "s3cret")},
	}
	for _, tt := range tests {
		// A refused Listen returns at once; an allowed one serves until ctx ends.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		ln, err := Listen(ctx, tt.addr, tt.token)
		if err == nil {
			err = g.ServeListener(ctx, ln, tt.token)
		}
		cancel()
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("Serve(%q, token %v) = %v, want error containing %q", tt.addr, tt.token != "", err, tt.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error reveals the token: %v", err)
		}
	}

	// A caller-made listener is judged by the address it is bound to.
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.ServeListener(context.Background(), ln, ""); err == nil || !strings.Contains(err.Error(), "non-loopback") {
		t.Errorf("ServeListener(0.0.0.0) without token = %v, want refusal", err)
	}
}

func TestBearerToken(t *testing.T) {
	const token = "tok-3f9a"
	g := New(Options{Logger: testLogger(t)})
	g.Set(Connection{Name: "f", Prefix: "f", Backend: withTools(&fakeBackend{}, []*mcp.Tool{{Name: "t", InputSchema: map[string]any{"type": "object"}}})})
	url, _ := serveOn(t, g, "0.0.0.0:0", writeToken(t, token))
	tests := []struct {
		auth string
		want int
	}{
		{auth: "", want: http.StatusUnauthorized},
		{auth: "Bearer wrong", want: http.StatusUnauthorized},
		{auth: "Bearer " + token + "x", want: http.StatusUnauthorized},
		{auth: "Basic " + token, want: http.StatusUnauthorized},
		{auth: token, want: http.StatusUnauthorized},
		{auth: "Bearer " + token, want: http.StatusOK},
		{auth: "bearer " + token, want: http.StatusOK},
	}
	for _, tt := range tests {
		if got := post(t, url, "", tt.auth, strings.NewReader(initializeBody)); got != tt.want {
			t.Errorf("Authorization %q: status %d, want %d", tt.auth, got, tt.want)
		}
	}

	// A real client with the right token works end to end.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	hc := &http.Client{Transport: bearerTransport{token: token, next: http.DefaultTransport}}
	c := mcp.NewClient(&mcp.Implementation{Name: "authed", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, classicSession)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "f_t"})
	if err != nil || textOf(res) != "t" {
		t.Errorf("f_t through an authenticated session = %q, %v", textOf(res), err)
	}
}

type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func TestOversizedBodyRefused(t *testing.T) {
	g := New(Options{Logger: testLogger(t), MaxRequestBodyBytes: 64 << 10})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	pad := strings.Repeat("x", 128<<10)
	big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"` + pad + `","version":"0"}}}`
	if got := post(t, url, "", "", strings.NewReader(big)); got != http.StatusRequestEntityTooLarge {
		t.Errorf("128 KiB body with a 64 KiB limit: status %d, want 413", got)
	}
	if got := post(t, url, "", "", strings.NewReader(initializeBody)); got != http.StatusOK {
		t.Errorf("small body: status %d, want 200", got)
	}
}

func TestDefaultBodyLimit(t *testing.T) {
	g := New(Options{Logger: testLogger(t)})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	body := io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"`),
		bytes.NewReader(bytes.Repeat([]byte("x"), defaultMaxBody)), strings.NewReader(`"}}`))
	if got := post(t, url, "", "", body); got != http.StatusRequestEntityTooLarge {
		t.Errorf("body over 4 MiB: status %d, want 413", got)
	}
}

// Shutdown ends open sessions (whose standalone SSE streams would otherwise
// hold it until the timeout) and returns within the bound.
func TestServeShutdown(t *testing.T) {
	// The bound is long and the test asks for well under half of it: a
	// loaded machine can take seconds to end sessions (it took 3.0 s of a
	// 3 s bound once), which proves nothing about holding on to a stream.
	g := New(Options{Logger: testLogger(t), ShutdownTimeout: 30 * time.Second})
	url, stop := serveOn(t, g, "127.0.0.1:0", "")
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "idle", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, classicSession)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	start := time.Now()
	if err := stop(); err != nil {
		t.Errorf("Serve returned %v after ctx was done, want nil", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("shutdown took %v with an idle session open, want well under the 30s bound", el)
	}
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(strings.TrimSuffix(url, Path), "http://"), time.Second); err == nil {
		t.Error("still accepting connections after Serve returned")
	}
}

// Shutdown ends a 2026-07-28 client's subscriptions/listen stream (a POST
// that stays open for the client's life, its list_changed channel) as it
// ends a classic session's standalone stream: counted among the POSTs in
// flight, it held the drain for half the bound and then Shutdown for the
// rest.
func TestServeShutdownModernListen(t *testing.T) {
	g := New(Options{Logger: testLogger(t), ShutdownTimeout: 30 * time.Second})
	url, stop := serveOn(t, g, "127.0.0.1:0", "")
	b := newRichBackend(t, "b")
	g.Set(Connection{Name: "b", Prefix: "pb", Backend: b.connect(t)})
	rc := dialRich(t, url, modernProtocol, nil)
	if v := rc.cs.InitializeResult().ProtocolVersion; v != modernProtocol {
		t.Fatalf("negotiated %s", v)
	}
	// The listen request is in flight once the client is connected.
	deadline := time.Now().Add(waitTimeout)
	for g.posts.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no subscriptions/listen request in flight")
		}
		time.Sleep(10 * time.Millisecond) // polling a counter: no event for it
	}
	start := time.Now()
	if err := stop(); err != nil {
		t.Errorf("Serve returned %v after ctx was done, want nil", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("shutdown took %v with a 2026-07-28 client listening, want well under the 30s bound", el)
	}
}

// Shutdown ends a subscriptions/listen on a classic session's POST too,
// which the go-sdk serves as long: it held the drain for half the bound.
func TestServeShutdownClassicListen(t *testing.T) {
	g := New(Options{Logger: testLogger(t), ShutdownTimeout: 30 * time.Second})
	url, stop := serveOn(t, g, "127.0.0.1:0", "")
	sid := initSession(t, url, nil)
	ctx, cancel := context.WithCancel(context.Background()) // held open by the client until the test ends
	defer cancel()
	open, answer := postListen(t, ctx, url, `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`,
		map[string]string{sessionIDHeader: sid, protocolVersionHeader: "2025-06-18"})
	if open == nil {
		t.Fatalf("the listen on a classic session: %s", answer)
	}
	start := time.Now()
	if err := stop(); err != nil {
		t.Errorf("Serve returned %v after ctx was done, want nil", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("shutdown took %v with a listen on a classic session, want well under the 30s bound", el)
	}
}

// The stdio gateway runs in a child process (this test binary) so that it
// really owns stdin and stdout.
func TestServeStdio(t *testing.T) {
	if os.Getenv("TETHER_GATEWAY_STDIO_CHILD") == "1" {
		stdioChild()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeStdio$")
	cmd.Env = append(os.Environ(), "TETHER_GATEWAY_STDIO_CHILD=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to stdio gateway: %v (stderr: %s)", err, stderr.String())
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "f_hello"})
	if err != nil || textOf(res) != "hello" {
		t.Errorf("f_hello over stdio = %q, %v", textOf(res), err)
	}
	// Closing stdin ends the session; the child exits 0 on its own.
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("child ended with %v; stderr:\n%s", cmd.ProcessState, stderr.String())
	}
	if !strings.Contains(stderr.String(), "gateway serving on stdio") {
		t.Errorf("logs did not go to stderr: %q", stderr.String())
	}
}

func stdioChild() {
	log := slogToStderr()
	g := New(Options{Logger: log})
	g.Set(Connection{Name: "f", Prefix: "f", Backend: withTools(&fakeBackend{}, []*mcp.Tool{{Name: "hello", InputSchema: map[string]any{"type": "object"}}})})
	err := g.ServeStdio(context.Background())
	if err != nil {
		log.Error("stdio gateway failed", "error", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveTransport's own rules, without a process: it returns nil when the
// client leaves and when ctx ends.
func TestServeTransportEnds(t *testing.T) {
	for _, how := range []string{"client closes", "ctx done"} {
		t.Run(how, func(t *testing.T) {
			g := New(Options{Logger: testLogger(t)})
			sp, cp := net.Pipe()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- g.serveTransport(ctx, &mcp.IOTransport{Reader: sp, Writer: sp}, "stdio") }()
			c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "0"}, nil)
			cctx, ccancel := context.WithTimeout(context.Background(), waitTimeout)
			defer ccancel()
			cs, err := c.Connect(cctx, &mcp.IOTransport{Reader: cp, Writer: cp}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if how == "client closes" {
				cs.Close()
			} else {
				cancel()
				defer cs.Close()
			}
			select {
			case err := <-errc:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("serveTransport = %v, want nil", err)
				}
			case <-cctx.Done():
				t.Fatal("serveTransport did not return")
			}
		})
	}
}

func slogToStderr() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
