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
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// resumeFloor is the least delay tether waits before resuming an event
// stream, whatever the server's retry field says (docs/contract.md §5a,
// "Limits on what servers send"; docs/reliability.md, row H7).
const resumeFloor = 250 * time.Millisecond

// stormHTTP is a classic streamable HTTP server (a go-sdk one, stateful)
// that ends each of its event streams after one event, numbered afresh
// (progress, as the go-sdk's rule counts it) and asking for retry: 1: its
// standalone stream (GET) and the stream of every call to its tool
// "storm", which never brings an answer. Its tool "hello" answers. It
// records when each GET came, by stream: "s" the standalone one's, "c"
// the call's resumptions.
type stormHTTP struct {
	url  string
	mu   sync.Mutex
	gets map[string][]time.Time
}

func newStormHTTP(t *testing.T) *stormHTTP {
	sh := &stormHTTP{gets: map[string][]time.Time{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "storm", Version: "1"}, nil)
	for _, name := range []string{"hello", "storm"} {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil
			})
	}
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	n := 0
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			stream := "s"
			if strings.HasPrefix(r.Header.Get("Last-Event-ID"), "c") {
				stream = "c"
			}
			sh.mu.Lock()
			sh.gets[stream] = append(sh.gets[stream], time.Now())
			n++
			id := n
			sh.mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "id: %s%d\nretry: 1\ndata:\n\n", stream, id)
			return
		case http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			var msg struct {
				Method string
				Params struct{ Name string }
			}
			_ = json.Unmarshal(body, &msg)
			if msg.Method == "tools/call" && msg.Params.Name == "storm" {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, "id: c0\nretry: 1\ndata:\n\n")
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	sh.url = hs.URL
	return sh
}

func (sh *stormHTTP) times(stream string) []time.Time {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return append([]time.Time(nil), sh.gets[stream]...)
}

// checkRate fails unless the GETs came at resumeFloor apart or more: n of
// them spread over (n-1)×resumeFloor at least, a rate of 4 a second at
// most.
func checkRate(t *testing.T, what string, gets []time.Time) {
	t.Helper()
	if len(gets) < 2 {
		t.Fatalf("%s: %d GETs, want a few to measure", what, len(gets))
	}
	span := gets[len(gets)-1].Sub(gets[0])
	t.Logf("%s: %d GETs in %v", what, len(gets), span)
	if want := time.Duration(len(gets)-1) * resumeFloor; span < want {
		t.Errorf("%s: %d GETs in %v, want them %v apart at least (%v in all)", what, len(gets), span, resumeFloor, want)
	}
}

// TestFaultStreamStorm: a server whose event streams end after every event
// with retry: 1 and a fresh id (docs/reliability.md, row H7) would have
// tether reconnect thousands of times a second, on its standalone stream
// for the session's life and on a call's stream until its callTimeout.
// tether resumes each no sooner than resumeFloor after the last, stays
// Connected to it, and a server beside it is served as ever.
func TestFaultStreamStorm(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	sh := newStormHTTP(t)
	calm := newStormHTTP(t) // its standalone stream storms too; its hello is what matters
	dir := t.TempDir()
	m := filepath.Join(dir, "storm.yaml")
	writeFile(t, m, httpManifest("storm", sh.url, "streamable", quickBackoff+"  callTimeout: 2s\n"))
	writeFile(t, filepath.Join(dir, "calm.yaml"), httpManifest("calm", calm.url, "streamable", quickBackoff))
	tt, ep := startTetherServing(t, dir)
	waitStatus(t, m, "storm", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	s := connectClient(t, ep)

	// The call's stream: resumed until its callTimeout ends it.
	msg := callError(call(s, 20*time.Second, "storm_storm", nil))
	if !strings.Contains(msg, "storm") {
		t.Errorf("the storm call answered %q, want an error naming the connection", msg)
	}
	checkRate(t, "the call's stream", sh.times("c"))

	// The standalone stream, meanwhile and after: a few seconds' worth.
	waitFor(t, 15*time.Second, "8 GETs of the standalone stream", func() (bool, string) {
		n := len(sh.times("s"))
		return n >= 8, fmt.Sprintf("%d GETs", n)
	})
	checkRate(t, "the standalone stream", sh.times("s"))
	// What an operator sees of it.
	tt.waitLogLine(t, 10*time.Second, "level=WARN", "event stream resumed later than the server asked", "connection=storm")

	res, err := call(s, 10*time.Second, "calm_hello", nil)
	if err != nil || textOf(res) != "hello" {
		t.Errorf("calm_hello beside the storm: %q", callError(res, err))
	}
	if st, _ := readStatus(t, m, "storm"); st.Phase != spec.PhaseConnected {
		t.Errorf("the storming server's connection is %s, want Connected", st.Phase)
	}
	if err := tt.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("tether is gone: %v", err)
	}
}
