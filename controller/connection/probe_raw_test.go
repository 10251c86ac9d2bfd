package connection

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// On a streamable session of a protocol with ping, the health probe is a
// ping sent beside the go-sdk (pingRaw), with an id of tether's own that
// cannot clash with the go-sdk's integer ids.
func TestProbePingsRaw(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "ping", Version: "1"}, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var mu sync.Mutex
	var pings [][]byte
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"method":"ping"`)) {
				mu.Lock()
				pings = append(pings, body)
				mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	s := connect(t, Request{Spec: httpSpec(ts.URL, "")})
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
	mu.Lock()
	defer mu.Unlock()
	if len(pings) != 3 {
		t.Fatalf("server saw %d pings, want 3", len(pings))
	}
	for _, p := range pings {
		if !bytes.Contains(p, []byte(`"id":"tether-ping-`)) {
			t.Errorf("ping not sent beside the go-sdk: %s", p)
		}
	}
}
