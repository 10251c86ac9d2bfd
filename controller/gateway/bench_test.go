package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/spec"
)

// The gateway's cost per call, measured against a direct call to the same
// in-process backend. Both sides speak streamable HTTP on loopback: the
// direct client to the backend, and through the gateway client → gateway →
// backend, which is the path of an HTTP backend in production. work is the
// backend's own time per call (a real tool does something); with work=0 the
// benchmark measures pure protocol cost, where the gateway's extra hop is
// the whole difference.
//
//	go test -run '^$' -bench 'Call$' -benchtime 2s ./controller/gateway
//
// Metrics: p50-µs and p99-µs of one call, calls/s at the given concurrency,
// and cpu-µs/call, the CPU the whole process (agent, gateway, backend) spent
// per call, which bounds throughput when the cores are saturated.

var benchCases = []struct {
	name string
	conc int
	work time.Duration
}{
	{"conc=1/work=0", 1, 0},
	{"conc=16/work=0", 16, 0},
	{"conc=1/work=1ms", 1, time.Millisecond},
	{"conc=16/work=1ms", 16, time.Millisecond},
}

func BenchmarkDirectCall(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			url := benchBackend(b, bc.work)
			cs := benchClient(b, url)
			runCalls(b, bc.conc, func(ctx context.Context) error {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: benchArgs})
				return err
			})
		})
	}
}

func BenchmarkGatewayCall(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			url := benchBackend(b, bc.work)
			be := newSessionBackend()
			c := mcp.NewClient(&mcp.Implementation{Name: "gateway-bench-upstream", Version: "0"}, be.clientOptions())
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			up, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, classicSession)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { up.Close() })
			be.cs = up
			var tools []*mcp.Tool
			for tool, err := range up.Tools(ctx, nil) {
				if err != nil {
					b.Fatal(err)
				}
				tools = append(tools, tool)
			}
			g := New(Options{ObserveCall: func(string, string, time.Duration) {}})
			g.Set(Connection{Name: "bench", Prefix: "bench", Backend: withTools(be, tools)})
			hs := httptest.NewServer(g.Handler())
			b.Cleanup(hs.Close)
			cs := benchClient(b, hs.URL)
			runCalls(b, bc.conc, func(ctx context.Context) error {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bench_echo", Arguments: benchArgs})
				return err
			})
		})
	}
}

// BenchmarkGatewayFastCall is BenchmarkGatewayCall with the backend reached
// through connection.Session, as tether does: calls take the fast path.
func BenchmarkGatewayFastCall(b *testing.B) { benchFastCall(b, false) }

// BenchmarkGatewayEraFastCall is BenchmarkGatewayFastCall for an agent of
// the 2026-07-28 protocol (the go-sdk client's default), which has no
// session: its calls take the fast path too.
func BenchmarkGatewayEraFastCall(b *testing.B) { benchFastCall(b, true) }

func benchFastCall(b *testing.B, era bool) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			url := benchBackend(b, bc.work)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			sess, err := connection.Connect(ctx, connection.Request{Name: "bench", Spec: &spec.Spec{HTTP: &spec.HTTPSpec{URL: url}}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = sess.Close() })
			g := New(Options{ObserveCall: func(string, string, time.Duration) {}})
			g.Set(Connection{Name: "bench", Prefix: "bench", Backend: sess})
			hs := httptest.NewServer(g.Handler())
			b.Cleanup(hs.Close)
			var cs *mcp.ClientSession
			if era {
				c := mcp.NewClient(&mcp.Implementation{Name: "bench-agent", Version: "0"}, nil)
				if cs, err = c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, nil); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { cs.Close() })
			} else {
				cs = benchClient(b, hs.URL)
				for g.downs.get(cs.ID()) == nil {
					if ctx.Err() != nil {
						b.Fatal("the gateway never tracked the session")
					}
					time.Sleep(time.Millisecond)
				}
			}
			runCalls(b, bc.conc, func(ctx context.Context) error {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bench_echo", Arguments: benchArgs})
				return err
			})
			if g.fastCalls.Load() == 0 {
				b.Fatal("no call took the fast path")
			}
		})
	}
}

// BenchmarkGatewaySDKCall is BenchmarkGatewayFastCall with the fast path
// off, served as tether serves (ServeListener, everything in front of the
// go-sdk's handler): the cost of a call the go-sdk carries. The last case
// sends 256 KiB of arguments.
func BenchmarkGatewaySDKCall(b *testing.B) {
	big := json.RawMessage(`{"message":"` + strings.Repeat("x", 256<<10) + `"}`)
	cases := append(benchCases[:len(benchCases):len(benchCases)], struct {
		name string
		conc int
		work time.Duration
	}{"conc=1/work=0/args=256KiB", 1, 0})
	for _, bc := range cases {
		args := benchArgs
		if strings.HasSuffix(bc.name, "256KiB") {
			args = big
		}
		b.Run(bc.name, func(b *testing.B) {
			url := benchBackend(b, bc.work)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			sess, err := connection.Connect(ctx, connection.Request{Name: "bench", Spec: &spec.Spec{HTTP: &spec.HTTPSpec{URL: url}}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = sess.Close() })
			g := New(Options{ObserveCall: func(string, string, time.Duration) {}})
			g.noFastPath.Store(true)
			g.Set(Connection{Name: "bench", Prefix: "bench", Backend: sess})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			sctx, stop := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- g.ServeListener(sctx, ln, "") }()
			b.Cleanup(func() { stop(); <-served })
			cs := benchClient(b, "http://"+ln.Addr().String()+Path)
			runCalls(b, bc.conc, func(ctx context.Context) error {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bench_echo", Arguments: args})
				return err
			})
			if g.fastCalls.Load() != 0 {
				b.Fatal("a call took the fast path")
			}
		})
	}
}

var benchArgs = json.RawMessage(`{"message":"hello, gateway"}`)

// benchBackend serves an echo tool over streamable HTTP on loopback.
func benchBackend(b *testing.B, work time.Duration) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench-backend", Version: "0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if work > 0 {
				time.Sleep(work)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	b.Cleanup(hs.Close)
	return hs.URL
}

func benchClient(b *testing.B, url string) *mcp.ClientSession {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "bench-agent", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, classicSession)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// runCalls runs b.N calls from exactly conc goroutines sharing one session
// (as an agent's parallel tool calls do) and reports latency percentiles and
// throughput.
func runCalls(b *testing.B, conc int, call func(context.Context) error) {
	ctx := context.Background()
	// Warm up connections and lazily built state outside the measurement.
	for range 20 {
		if err := call(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	var (
		next  atomic.Int64
		mu    sync.Mutex
		lats  = make([]time.Duration, 0, b.N)
		first error
		wg    sync.WaitGroup
	)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for range conc {
		wg.Go(func() {
			local := make([]time.Duration, 0, b.N/conc+1)
			var err error
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err = call(ctx); err != nil {
					break
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, local...)
			if err != nil && first == nil {
				first = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	if first != nil {
		b.Fatal(first)
	}
	slices.Sort(lats)
	pct := func(p float64) float64 {
		return float64(lats[int(float64(len(lats)-1)*p)].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(len(lats))/elapsed.Seconds(), "calls/s")
	// CPU of the whole process (client, gateway and backend) per call.
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(lats)), "cpu-µs/call")
}

// benchTools is a backend's tool list of n tools with small object schemas.
func benchTools(n int) []*mcp.Tool {
	tools := make([]*mcp.Tool, n)
	for i := range tools {
		tools[i] = &mcp.Tool{
			Name:        fmt.Sprintf("tool%d", i),
			Description: "a tool of the benchmark backend",
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
		}
	}
	return tools
}

// benchGateway returns a gateway serving conns connections of tools tools
// each, named c0000…, prefixed like their names, each with its own backend.
func benchGateway(conns, tools int) *Gateway {
	g := New(Options{ObserveCall: func(string, string, time.Duration) {}})
	list := benchTools(tools)
	for i := range conns {
		name := fmt.Sprintf("c%04d", i)
		g.Set(Connection{Name: name, Prefix: name, Backend: withTools(&idBackend{id: i}, list)})
	}
	return g
}

// BenchmarkRoute is the gateway's own work on one tools/call, without the
// protocol around it: find the route by exposed name among 1,000
// connections × 5 tools, bound the call, call the backend (which answers at
// once), record the outcome.
func BenchmarkRoute(b *testing.B) {
	g := benchGateway(1000, 5)
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "c0500_tool3", Arguments: benchArgs}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := g.callTool(ctx, req)
		if err != nil || res == nil {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkSet is what publishing connections costs the gateway at 1,000
// connections × 5 tools: "steady" re-Sets one connection unchanged (what a
// reconcile of a connected connection does), "reconnect" Sets one with a new
// backend, and "bringup" Sets all 1,000 into an empty gateway (per op: the
// whole bring-up, as at tether's cold start).
func BenchmarkSet(b *testing.B) {
	list := benchTools(5)
	b.Run("steady", func(b *testing.B) {
		g := benchGateway(1000, 5)
		be := &idBackend{}
		g.Set(Connection{Name: "c0500", Prefix: "c0500", Backend: withTools(be, list)})
		b.ReportAllocs()
		for b.Loop() {
			g.Set(Connection{Name: "c0500", Prefix: "c0500", Backend: withTools(be, list)})
		}
	})
	b.Run("reconnect", func(b *testing.B) {
		g := benchGateway(1000, 5)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			g.Set(Connection{Name: "c0500", Prefix: "c0500", Backend: withTools(&idBackend{id: i}, list)})
		}
	})
	b.Run("bringup", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchGateway(1000, 5)
		}
	})
}
