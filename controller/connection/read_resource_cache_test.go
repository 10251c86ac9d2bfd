//go:build unix

package connection

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// aliveAfterGC counts the weak pointers whose values survive a collection.
func aliveAfterGC[T any](held []weak.Pointer[T]) int {
	runtime.GC()
	n := 0
	for _, w := range held {
		if w.Value() != nil {
			n++
		}
	}
	return n
}

// On a 2026-07-28 session the go-sdk's ReadResource keeps every result by
// URI until notifications/resources/updated names that URI: tether reads
// beneath that store, so that a gateway client reading many distinct URIs
// does not grow the session by a result each for its life.
func TestReadResourceHoldsNoResults(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "many-uris", Version: "1"}, nil)
	var reads atomic.Int64
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "n", URITemplate: "res://n/{n}"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			reads.Add(1)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: strings.Repeat("r", 1<<10)}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
	if v := s.Server().ProtocolVersion; v < protocol2026 {
		t.Fatalf("negotiated %s, want %s", v, protocol2026)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 40
	var held []weak.Pointer[mcp.ReadResourceResult]
	for i := range n {
		uri := fmt.Sprintf("res://n/%d", i)
		res, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("ReadResource %s: %v", uri, err)
		}
		if len(res.Contents) != 1 || res.Contents[0].URI != uri || len(res.Contents[0].Text) != 1<<10 {
			t.Fatalf("ReadResource %s = %+v", uri, res.Contents)
		}
		held = append(held, weak.Make(res))
	}
	if got := aliveAfterGC(held); got != 0 {
		t.Errorf("%d of the %d results read are still held after their answers, want none", got, n)
	}
	if got := reads.Load(); got != n {
		t.Errorf("the server read %d resources, want %d", got, n)
	}
}
