//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// TestLogRelaySlowClientCostsOnlyItself: two clients of one stdio backend
// (every message of a stdio server goes through the go-sdk's one
// notification goroutine of its session). Client A asks for log messages,
// calls a tool that sends 32 MiB of them and never reads its answer's
// stream, so tether's write to A blocks; once A's call is over at the
// backend, client B calls a tool that sends three messages: B's stream
// must carry its three messages and then its answer, while A still holds
// its stream unread (tether dropped A's messages past A's queue, one WARN,
// which says A's write was blocked). Before, A's blocked write held the
// session's notification goroutine: B's answer waited and came back before
// its messages (docs/reliability.md G12).
func TestLogRelaySlowClientCostsOnlyItself(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "be.yaml")
	writeFile(t, m, faultManifest(t, "be", []string{"-logs-tool"}, quick+"  callTimeout: 10s\n"))
	tt, ep := startTetherServing(t, dir, "--stream-write-timeout", "120s")
	waitStatus(t, m, "be", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))

	// A: a session that asked for debug messages, and a call whose stream
	// it never reads, on a connection with a small receive buffer.
	sidA := rawInit(t, ep.gateway)
	if code, body, _ := postRaw(t, ep.gateway, `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`, sidA); code != http.StatusOK {
		t.Fatalf("A's logging/setLevel: %d %s", code, body)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(ep.gateway, "http://"), "/mcp")
	c, err := net.Dial("tcp", addr)
	must(t, err)
	defer c.Close()
	must(t, c.(*net.TCPConn).SetReadBuffer(4096))
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"be_logs","arguments":{"count":64,"bytes":524288}}}`
	_, err = fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n%s", addr, sidA, len(call), call)
	must(t, err)
	// ... and never reads.

	// A's call is over at the backend: from here on only B's calls are
	// in flight there.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if v, ok := metricValue(scrape(t, ep), `tether_gateway_tool_calls_total{connection="be",result="ok"}`); ok && v >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("client A's call never ended at the backend")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// B: reads its stream; its three messages come before its answer.
	sidB := rawInit(t, ep.gateway)
	if code, body, _ := postRaw(t, ep.gateway, `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`, sidB); code != http.StatusOK {
		t.Fatalf("B's logging/setLevel: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.gateway,
		strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"be_logs","arguments":{"count":3,"bytes":8}}}`))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	req.Header.Set("Mcp-Session-Id", sidB)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Data string `json:"data"`
			} `json:"params"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(data), &msg); err != nil {
			t.Fatalf("B's stream carried %q: %v", data, err)
		}
		if msg.Result != nil {
			got = append(got, "answer")
			break
		}
		got = append(got, msg.Params.Data)
	}
	if want := "0:llllllll,1:llllllll,2:llllllll,answer"; strings.Join(got, ",") != want {
		t.Errorf("B's stream, while A did not read, carried %q, want %s", got, want)
	}
	tt.waitLogLine(t, 10*time.Second, "level=WARN", "dropped server log messages for a client that is not reading them", "connection=be")
}
