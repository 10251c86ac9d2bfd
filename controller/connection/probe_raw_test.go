//go:build unix

package connection

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// On a streamable session of a protocol with ping, the health probe is a
// ping sent beside the go-sdk (pingRaw), with an id of tether's own that
// cannot clash with the go-sdk's integer ids.
func TestProbePingsRaw(t *testing.T) {
	url, sent := methodServer(t, false)
	s := connect(t, Request{Spec: httpSpec(url, "")})
	if v := s.Server().ProtocolVersion; v >= protocol2026 {
		t.Fatalf("negotiated %s: this test needs a protocol with ping", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 3 {
		if err := s.Probe(ctx); err != nil {
			t.Fatalf("Probe: %v", err)
		}
	}
	pings := sent("ping")
	if len(pings) != 3 {
		t.Fatalf("server saw %d pings, want 3", len(pings))
	}
	for _, p := range pings {
		if !bytes.Contains(p, []byte(`"id":"tether-ping-`)) {
			t.Errorf("ping not sent beside the go-sdk: %s", p)
		}
	}
}

// TestProbeForeignResponsesAreNoAnswers: on the raw ping's stream, a
// server that stopped answering sends responses with ids that no request
// of tether's waits on (made up, the id of another raw request, a go-sdk
// integer id) and then nothing: they prove nothing, the probe fails
// (docs/reliability.md, "Hostile servers", H2).
func TestProbeForeignResponsesAreNoAnswers(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "liar", Version: "1"}, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var stopped atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed) // no standalone stream
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !stopped.Load() || !bytes.Contains(body, []byte(`"method":"ping"`)) {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, id := range []string{`"zzz"`, `"tether-fast-1"`, `1`} {
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}\n\n", id)
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(hs.Close)
	s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
	if err := probe(s); err != nil {
		t.Fatalf("a probe of the server while it answers: %v", err)
	}
	stopped.Store(true)
	if err := probe(s); err == nil {
		t.Error("a probe passed on responses to requests nobody made")
	}
}
