//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// endlessAnswer answers with status 200, contentType, and then data without
// end (no newline) until the client goes away: the answer that grew tether
// by hundreds of MB a second (issue 21, item 1).
func endlessAnswer(w http.ResponseWriter, r *http.Request, contentType string) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	head := `data: {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`
	if contentType == "application/json" {
		head = head[len("data: "):]
	}
	if _, err := io.WriteString(w, head); err != nil {
		return
	}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	rc := http.NewResponseController(w)
	for r.Context().Err() == nil {
		if _, err := w.Write(chunk); err != nil {
			return
		}
		_ = rc.Flush()
	}
}

// hostileHTTP is an HTTP MCP server that attacks its client: /sse-start and
// /json-start answer every POST (initialize first) with an endless event or
// JSON body; /mcp is a real go-sdk server whose tools endless_sse and
// endless_json are answered that way mid-session, and hello normally.
func hostileHTTP(t *testing.T) *httptest.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	for _, name := range []string{"hello", "endless_sse", "endless_json"} {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil
			})
	}
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	mux := http.NewServeMux()
	for path, kind := range map[string]string{"/sse-start": "text/event-stream", "/json-start": "application/json"} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				w.WriteHeader(http.StatusMethodNotAllowed)
				return
			}
			endlessAnswer(w, r, kind)
		})
	}
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var msg struct {
				Method string
				Params struct{ Name string }
			}
			_ = json.Unmarshal(body, &msg)
			if msg.Method == "tools/call" {
				switch msg.Params.Name {
				case "endless_sse":
					endlessAnswer(w, r, "text/event-stream")
					return
				case "endless_json":
					endlessAnswer(w, r, "application/json")
					return
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		inner.ServeHTTP(w, r)
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs
}

// peakRSSMB returns the peak resident set size of pid (VmHWM) in MB.
func peakRSSMB(t testing.TB, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.Fields(rest)[0])
			return float64(kb) / 1024
		}
	}
	t.Fatalf("no VmHWM for %d", pid)
	return 0
}

// callError is what a gateway call that failed says: its MCP error, or the
// text of its error result.
func callError(res *mcp.CallToolResult, err error) string {
	if err != nil {
		return err.Error()
	}
	if res != nil && res.IsError {
		return textOf(res)
	}
	return ""
}

// TestFaultEndlessAnswers: HTTP servers that answer with an event or a JSON
// body that never ends (docs/reliability.md, row H1), at the handshake and
// in the middle of a call. Each meets the 16 MiB default of
// --max-message-bytes: the attempt or the call fails with an error naming
// the connection, the limit and the flag, the session is dropped and
// connected again, and tether's peak RSS stays under 200 MB.
func TestFaultEndlessAnswers(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	hs := hostileHTTP(t)
	dir := t.TempDir()
	for name, path := range map[string]string{"sse-start": "/sse-start", "json-start": "/json-start", "midcall": "/mcp"} {
		writeFile(t, filepath.Join(dir, name+".yaml"), httpManifest(name, hs.URL+path, "streamable", quick))
	}
	tt, ep := startTetherServing(t, dir)
	const limit = "of more than 16777216 bytes (the limit set by --max-message-bytes)"

	for _, c := range []struct{ name, what string }{
		{"sse-start", "an SSE event"},
		{"json-start", "an HTTP response body"},
	} {
		t.Run("H1 "+c.name, func(t *testing.T) {
			want := "connection " + c.name + ": the server sent " + c.what + " " + limit
			st := waitStatus(t, filepath.Join(dir, c.name+".yaml"), c.name, 30*time.Second, "Reconnecting after 2 attempts over the limit", func(st spec.ConnectionStatus) bool {
				return st.Phase == spec.PhaseReconnecting && st.Attempt >= 2 && strings.Contains(st.LastError, want)
			})
			t.Logf("lastError: %s", st.LastError)
		})
	}

	t.Run("H1 mid-call", func(t *testing.T) {
		m := filepath.Join(dir, "midcall.yaml")
		waitStatus(t, m, "midcall", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		s := connectClient(t, ep)
		for _, c := range []struct{ tool, what string }{
			{"midcall_endless_sse", "an SSE event"},
			{"midcall_endless_json", "an HTTP response body"},
		} {
			want := "connection midcall: the server sent " + c.what + " " + limit
			// Over the gateway's fast path or the go-sdk's, the call fails
			// with the limit's error.
			msg := callError(call(s, 30*time.Second, c.tool, nil))
			if !strings.Contains(msg, want) {
				t.Errorf("%s failed with %q, want %q", c.tool, msg, want)
			}
			line := tt.waitLogLine(t, 15*time.Second, "connection lost", "connection=midcall", c.what+" "+limit)
			t.Logf("%s: %s", c.tool, line)
			// Connected again, and serving.
			waitFor(t, 15*time.Second, "midcall_hello to answer again", func() (bool, string) {
				res, err := call(s, 5*time.Second, "midcall_hello", nil)
				return err == nil && textOf(res) == "hello", callError(res, err)
			})
		}
	})

	t.Run("H1 tether's peak RSS", func(t *testing.T) {
		peak := peakRSSMB(t, tt.cmd.Process.Pid)
		t.Logf("tether's peak RSS (VmHWM) under endless answers: %.1f MB", peak)
		if peak >= 200 {
			t.Errorf("tether's peak RSS is %.1f MB, want under 200 MB", peak)
		}
	})
}

// TestFaultServerTalksButNeverAnswers: a stdio server that stops answering
// requests but sends notifications/message and progress every 50 ms
// (docs/reliability.md, row H2): for a token nobody waits on, and for the
// call it stalls, until that call's callTimeout. Its health checks time out with no answer to anything else, so
// it goes Degraded, then Reconnecting, with WARN lines; a call made while it
// is hung fails with an error naming the connection; a new child serves.
func TestFaultServerTalksButNeverAnswers(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	dir := t.TempDir()
	m := filepath.Join(dir, "talker.yaml")
	// Three failures, 300 ms apart, so that Degraded lasts long enough to
	// be seen in the status file.
	writeFile(t, m, faultManifest(t, "talker", nil,
		"  healthCheck: {interval: 300ms, timeout: 300ms, failureThreshold: 3}\n"+quickBackoff+"  callTimeout: 2s\n"))
	tt, ep := startTetherServing(t, dir)
	st := waitStatus(t, m, "talker", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	pid := st.Process.PID
	s := connectClient(t, ep)

	stalled := make(chan string, 1)
	go func() {
		// With a progress token: the server streams progress for the call
		// (which counts only until its callTimeout of 2 s) besides its
		// notifications/message and progress for a token nobody waits on.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stalled <- callError(s.CallTool(ctx, &mcp.CallToolParams{Name: "talker_stall", Meta: mcp.Meta{"progressToken": "stall"}}))
	}()
	waitStatus(t, m, "talker", 10*time.Second, "Degraded", phaseIs(spec.PhaseDegraded))
	// A call while the server is hung fails: by its callTimeout, or at
	// once when the session is dropped under it.
	echoed := make(chan string, 1)
	go func() {
		res, err := call(s, 10*time.Second, "talker_echo", map[string]any{"text": "anyone?"})
		echoed <- callError(res, err)
	}()
	tt.waitLogLine(t, 10*time.Second, "level=WARN", "health check failed", "connection=talker")
	line := tt.waitLogLine(t, 10*time.Second, "level=WARN", "connection lost", "connection=talker", "health checks in a row failed")
	t.Logf("%s", line)
	// While the stalled call waited, its progress kept the server alive (a
	// probe that timed out behind it passed); after its callTimeout, the
	// rest of the server's talk counted for nothing.
	tt.waitLogLine(t, time.Second, "probe timed out behind other traffic: server alive", "connection=talker")
	if msg := <-echoed; !strings.Contains(msg, "talker") {
		t.Errorf("a call to the hung server answered %q, want an error naming the connection", msg)
	} else {
		t.Logf("a call while hung: %s", msg)
	}
	if msg := <-stalled; msg == "" {
		t.Error("the stall call succeeded")
	}
	waitStatus(t, m, "talker", 15*time.Second, "Connected with a new child", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseConnected && st.Process != nil && st.Process.PID != pid
	})
	res, err := call(s, 10*time.Second, "talker_echo", map[string]any{"text": "back"})
	if err != nil || textOf(res) != "back" {
		t.Errorf("after the reconnect, talker_echo = %q", callError(res, err))
	}
}

// TestFaultMessageLimitFlag: --max-message-bytes reaches every connection:
// with 64 KiB, a 100 KB tool result over stdio fails naming that bound,
// and a 10 KB one passes. A bound too small for a handshake is refused.
func TestFaultMessageLimitFlag(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	dir := t.TempDir()
	m := filepath.Join(dir, "big.yaml")
	writeFile(t, m, faultManifest(t, "big", nil, quick))
	_, ep := startTetherServing(t, dir, "--max-message-bytes", "65536")
	waitStatus(t, m, "big", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	s := connectClient(t, ep)
	if res, err := call(s, 10*time.Second, "big_big", map[string]any{"bytes": 10000}); err != nil || len(textOf(res)) != 10000 {
		t.Fatalf("a 10 KB result did not pass: %s", callError(res, err))
	}
	want := "connection big: the server sent a stdio frame of more than 65536 bytes (the limit set by --max-message-bytes)"
	if msg := callError(call(s, 10*time.Second, "big_big", map[string]any{"bytes": 100000})); !strings.Contains(msg, want) {
		t.Errorf("a 100 KB result failed with %q, want %q", msg, want)
	}

	out, err := exec.Command(filepath.Join(builtBinaries(t), "tether"), "run", "--dir", dir, "--max-message-bytes", "100").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--max-message-bytes must be at least 4096") {
		t.Errorf("tether run --max-message-bytes 100: %v, %s; want it refused", err, out)
	}
}

// liarHTTP is a go-sdk server over streamable HTTP that stops answering
// after its tool "stop": from then on it holds every request, and answers
// a ping on its stream with responses to requests nobody waits on (a
// made-up id, the id of another raw request, a go-sdk integer id).
func liarHTTP(t *testing.T) *httptest.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "liar", Version: "1"}, nil)
	var stopped atomic.Bool
	srv.AddTool(&mcp.Tool{Name: "stop", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			stopped.Store(true)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stopped"}}}, nil
		})
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && stopped.Load() {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				ID     json.RawMessage
				Method string
			}
			if json.Unmarshal(body, &msg) == nil && len(msg.ID) > 0 {
				if msg.Method == "ping" {
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
					for _, id := range []string{`"zzz"`, `"tether-fast-1"`, `1`} {
						fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}\n\n", id)
					}
					w.(http.Flusher).Flush()
				}
				<-r.Context().Done()
				return
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// TestFaultServerAnswersNobody: a streamable HTTP server that stops
// answering but sends, on the stream of each health probe, responses to
// requests nobody made (docs/reliability.md, row H2). They prove nothing:
// its probes fail and the connection is lost and retried.
func TestFaultServerAnswersNobody(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	hs := liarHTTP(t)
	dir := t.TempDir()
	m := filepath.Join(dir, "liar.yaml")
	writeFile(t, m, httpManifest("liar", hs.URL, "streamable",
		"  healthCheck: {interval: 300ms, timeout: 300ms, failureThreshold: 3}\n"+quickBackoff))
	tt, ep := startTetherServing(t, dir)
	waitStatus(t, m, "liar", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	s := connectClient(t, ep)
	if res, err := call(s, 10*time.Second, "liar_stop", nil); err != nil || textOf(res) != "stopped" {
		t.Fatalf("liar_stop = %q", callError(res, err))
	}
	line := tt.waitLogLine(t, 15*time.Second, "level=WARN", "connection lost", "connection=liar", "health checks in a row failed")
	t.Logf("%s", line)
}
