//go:build unix

package connection

//lint:file-ignore SA1019 logging/setLevel (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway relays

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A 2026-07-28 session has no logging/setLevel (SEP-2575: the level travels
// in each request's _meta): SetLogLevel sends nothing there, and says
// nothing went wrong, where a classic session sends it. The go-sdk's client
// sent it without the era's _meta, and its server refused it.
func TestSetLogLevelAsksOnlyClassicServers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stateless bool
		want      int32
	}{{"2026-07-28", true, 0}, {"classic", false, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "levels", Version: "1"}, &mcp.ServerOptions{
				Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}},
			})
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: tc.stateless})
			var asked atomic.Int32 // requests that reached the server, refused or not
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if m, _ := rpcOf(r); m == "logging/setLevel" {
					asked.Add(1)
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(hs.Close)
			s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := s.SetLogLevel(ctx, "debug"); err != nil {
				t.Fatalf("SetLogLevel (protocol %s): %v", s.Server().ProtocolVersion, err)
			}
			if got := asked.Load(); got != tc.want {
				t.Errorf("protocol %s: the server was asked logging/setLevel %d times, want %d", s.Server().ProtocolVersion, got, tc.want)
			}
		})
	}
}
