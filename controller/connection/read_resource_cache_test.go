//go:build unix

package connection

//lint:file-ignore SA1019 the logging level a client asked for travels with each 2026-07-28 request (SEP-2575): what a test here checks

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
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
	s := connectModern(t, srv, Request{})
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

// levelCaller is a downstream client that asked for a logging level.
type levelCaller struct {
	fakeCaller
	level mcp.LoggingLevel
}

func (c *levelCaller) LogLevel() mcp.LoggingLevel { return c.level }

// A read beneath the go-sdk's store carries the _meta the go-sdk would
// have put on it (the negotiated version, tether's client info and
// capabilities) beside the request's own (its progress token) and the
// logging level of the client that reads (SEP-2575).
func TestReadResourceBeneathTheGoSDKKeepsItsMeta(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "meta", Version: "1"}, nil)
	metas := make(chan mcp.Meta, 1)
	srv.AddResource(&mcp.Resource{Name: "r", URI: "res://r"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			metas <- req.Params.Meta
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "r"}}}, nil
		})
	s := connectModern(t, srv, Request{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctx = wire.WithCaller(ctx, &levelCaller{level: "debug"})
	if _, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "res://r", Meta: mcp.Meta{"progressToken": "p1"}}); err != nil {
		t.Fatalf("ReadResource: %v", err)
	}
	meta := <-metas
	for key, want := range map[string]any{
		mcp.MetaKeyProtocolVersion: s.Server().ProtocolVersion,
		mcp.MetaKeyLogLevel:        "debug",
		"progressToken":            "p1",
	} {
		if got := meta[key]; got != want {
			t.Errorf("_meta %s = %v, want %v (all: %v)", key, got, want, meta)
		}
	}
	for _, key := range []string{mcp.MetaKeyClientInfo, mcp.MetaKeyClientCapabilities} {
		if meta[key] == nil {
			t.Errorf("_meta lacks %s: %v", key, meta)
		}
	}
}

// Every read reaches the server, even of a result it marked cacheable
// (ttlMs): the gateway's clients read through tether, not from a store
// (docs/contract.md §5a).
func TestReadResourceOfACacheableResultReachesTheServer(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "ttl", Version: "1"}, nil)
	var reads atomic.Int64
	srv.AddResource(&mcp.Resource{Name: "r", URI: "res://r"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			n := reads.Add(1)
			r := &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: fmt.Sprint(n)}}}
			r.TTLMs = 60_000
			return r, nil
		})
	s := connectModern(t, srv, Request{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 1; i <= 2; i++ {
		res, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "res://r"})
		if err != nil {
			t.Fatalf("ReadResource: %v", err)
		}
		if got, want := res.Contents[0].Text, fmt.Sprint(i); got != want {
			t.Errorf("read %d answered %q, want %q (the server's answer, not one kept)", i, got, want)
		}
	}
}
