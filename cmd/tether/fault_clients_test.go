//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// Hostile clients of the gateway (docs/reliability.md, "Hostile clients",
// rows C1–): each test drives the real binary with a client written to
// misbehave.

// startTetherNofile is startTetherServing with the process's descriptor
// limit (soft and hard: the Go runtime raises the soft one to the hard one)
// set to nofile, so that a test can show what happens when clients would
// take them all.
func startTetherNofile(t *testing.T, dir string, nofile int, extra ...string) (*tether, endpoints) {
	t.Helper()
	bin := builtBinaries(t)
	gw, mp := testport.Free(t), testport.Free(t)
	args := append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile), filepath.Join(bin, "tether"),
		"run", "--dir", dir, "--log-level", "debug",
		"--listen", fmt.Sprintf("127.0.0.1:%d", gw), "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", mp)}, extra...)
	cmd := exec.Command("/bin/sh", args...)
	tt := startCmd(t, cmd, dir)
	waitTCP(t, gw, 20*time.Second)
	waitTCP(t, mp, 20*time.Second)
	return tt, endpoints{
		gateway: fmt.Sprintf("http://127.0.0.1:%d/mcp", gw),
		metrics: fmt.Sprintf("http://127.0.0.1:%d", mp),
	}
}

// slowBody opens a connection to the gateway and sends a POST's headers
// with a long Content-Length and one byte of the body, and no more: the
// slow-body attack of issue 21.
func slowBody(addr string) (net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	_, err = fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{", addr)
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// TestFaultSlowBodies: more connections than tether has descriptors, each
// sending one byte of a long body (row C1). tether holds no more than
// --max-connections at a time, so a killed stdio child restarts and its
// status file is written meanwhile; the body deadline closes every attack
// connection; then a client initializes and calls at once.
// stillOpen reads every connection to its end, each for at most wait, and
// counts those still open then: tether has not closed them.
func stillOpen(conns []net.Conn, wait time.Duration) int {
	var wg sync.WaitGroup
	var open atomic.Int64
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(wait))
			_, err := io.Copy(io.Discard, c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				open.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(open.Load())
}

func TestFaultSlowBodies(t *testing.T) {
	const (
		nofile  = 256 // tether's descriptor limit
		attack  = 320 // more connections than that
		maxConn = 64  // well under it
	)
	dir := t.TempDir()
	m := filepath.Join(dir, "be.yaml")
	writeFile(t, m, faultManifest(t, "be", nil, quick))
	tt, ep := startTetherNofile(t, dir, nofile, "--max-connections", fmt.Sprint(maxConn), "--request-read-timeout", "3s")
	st := waitStatus(t, m, "be", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	pid := st.Process.PID

	addr := strings.TrimSuffix(strings.TrimPrefix(ep.gateway, "http://"), "/mcp")
	conns := make([]net.Conn, 0, attack)
	for range attack {
		c, err := slowBody(addr)
		if err != nil {
			t.Fatalf("opening attack connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()

	// Under attack: a killed child restarts (pipes, a process) and its new
	// pid reaches the status file (a write).
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	waitStatus(t, m, "be", 30*time.Second, "Connected with a new process", func(s spec.ConnectionStatus) bool {
		return s.Phase == spec.PhaseConnected && s.Process != nil && s.Process.PID != pid
	})
	if strings.Contains(tt.logs.String(), "too many open files") {
		t.Errorf("tether ran out of descriptors under the attack")
	}

	// Every attack connection is closed by tether: a read ends (EOF, or
	// the answer to the body that never came, then EOF). The bound only
	// keeps a broken tether from hanging the test.
	open := stillOpen(conns, 2*time.Minute)
	if open > 0 {
		t.Fatalf("%d of %d slow-body connections were never closed by tether", open, attack)
	}

	// A legitimate client is served at once.
	s := connectClient(t, ep)
	res, err := call(s, 10*time.Second, "be_echo", map[string]any{"text": "served"})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("a call after the attack: %v %+v", err, res)
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", tt.cmd.Process.Pid)); err == nil && len(fds) >= nofile/2 {
		t.Errorf("tether holds %d descriptors after the attack ended", len(fds))
	}
}

// TestFaultSlowBodiesServedDuring: the slow-body attack of row C1 goes on
// (a body deadline far beyond the test), and a legitimate client
// initializes and calls meanwhile (row C7): at --max-connections the
// gateway closes the connection stalled the longest to admit a new one,
// rather than leaving the new one in the backlog behind the attack.
func TestFaultSlowBodiesServedDuring(t *testing.T) {
	const (
		nofile  = 256
		attack  = 320
		maxConn = 64
	)
	dir := t.TempDir()
	m := filepath.Join(dir, "be.yaml")
	writeFile(t, m, faultManifest(t, "be", nil, quick))
	tt, ep := startTetherNofile(t, dir, nofile, "--max-connections", fmt.Sprint(maxConn), "--request-read-timeout", "10m")
	waitStatus(t, m, "be", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))

	addr := strings.TrimSuffix(strings.TrimPrefix(ep.gateway, "http://"), "/mcp")
	conns := make([]net.Conn, 0, attack)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range attack {
		c, err := slowBody(addr)
		if err != nil {
			t.Fatalf("opening attack connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}

	// The legitimate client, while the attack holds every slot.
	s := connectClient(t, ep)
	res, err := call(s, 10*time.Second, "be_echo", map[string]any{"text": "served"})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("a call during the attack: %v %+v", err, res)
	}

	// The attack was still on: attack connections tether has not closed
	// (a read times out rather than ending) were open during the call, as
	// none is reopened; and no more than the bound of them.
	open := stillOpen(conns, 200*time.Millisecond)
	if open == 0 || open > maxConn {
		t.Errorf("%d attack connections open after the call, want between 1 and %d (--max-connections)", open, maxConn)
	}
	// tether's log reaches the test through a pipe: wait for the line.
	tt.waitLog(t, 10*time.Second, "gateway at its connection bound")
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", tt.cmd.Process.Pid)); err == nil && len(fds) >= nofile/2+32 {
		t.Errorf("tether holds %d descriptors under the attack (bound %d connections)", len(fds), maxConn)
	}
}

// TestFaultSlowBodiesBudget: slow connections that each declare a 4 MiB
// body and send one byte, more than the default --max-request-bytes-in-flight
// would hold at their declared length (row C8), and a legitimate client
// initializes and calls meanwhile. A body holds budget for what it has
// sent (and a chunk ahead), so the attack holds a few MiB of the 128 and
// nobody is refused; it held the whole budget, and every call got 503,
// when bodies took their declared length up front.
func TestFaultSlowBodiesBudget(t *testing.T) {
	const (
		attack   = 40      // 40 × 4 MiB declared: past the 128 MiB default
		declared = 4 << 20 // the body limit
	)
	dir := t.TempDir()
	m := filepath.Join(dir, "be.yaml")
	writeFile(t, m, faultManifest(t, "be", nil, quick))
	_, ep := startTetherServing(t, dir, "--request-read-timeout", "10m")
	waitStatus(t, m, "be", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))

	addr := strings.TrimSuffix(strings.TrimPrefix(ep.gateway, "http://"), "/mcp")
	conns := make([]net.Conn, 0, attack)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range attack {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("opening attack connection %d: %v", i, err)
		}
		conns = append(conns, c)
		// Expect: 100-continue tells the test when tether reads the body
		// (net/http answers "100 Continue" at its first read); the budget
		// does not depend on it.
		_, err = fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", addr, declared)
		must(t, err)
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
			t.Fatalf("attack connection %d: tether answered %q (%v) instead of reading the body", i, line, err)
		}
		_, err = c.Write([]byte("{"))
		must(t, err)
	}

	// Every attack body is being read, none answered: the legitimate
	// client, at once.
	s := connectClient(t, ep)
	res, err := call(s, 10*time.Second, "be_echo", map[string]any{"text": "served"})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("a call beside %d slow 4 MiB bodies: %v %+v", attack, err, res)
	}
}

// rawInit initializes a gateway session with raw requests, as a client that
// never DELETEs it (a crashed agent, a careless script), and returns its id.
func rawInit(t *testing.T, url string) string {
	t.Helper()
	return rawInitBody(t, url, rawInitializeBody)
}

const rawInitializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"leaky","version":"0"}}}`

// leakyInitializeBodies are initializes as the go-sdk reads them (keys
// case-sensitively, the first of duplicate keys, trailing data ignored),
// which encoding/json reads otherwise: a guess from the body let them
// bypass --max-sessions.
var leakyInitializeBodies = []string{
	rawInitializeBody,
	rawInitializeBody + " x",
	strings.TrimSuffix(rawInitializeBody, "}") + `,"Method":"x"}`,
}

// rawInitBody is rawInit with the initialize body given.
func rawInitBody(t *testing.T, url, initialize string) string {
	t.Helper()
	code, body, sid := postRaw(t, url, initialize, "")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", code, body)
	}
	if code, body, _ := postRaw(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	return sid
}

// postRaw posts body on session sid ("" for none) and returns the status,
// the body and the session id the answer carries.
func postRaw(t *testing.T, url, body, sid string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	return resp.StatusCode, readAll(resp.Body), resp.Header.Get("Mcp-Session-Id")
}

// TestFaultSessionsNeverDeleted: a client opens sessions in a loop and never
// DELETEs them (row C2), a third of them with initialize bodies a guess
// from the body took for no initialize (leakyInitializeBodies): uncounted,
// they were never closed. tether holds no more than --max-sessions (its
// goroutines stay flat), closes the least recently used idle ones with one
// WARN, a tools change logs no line per session, and a client that keeps
// using its session is served throughout.
func TestFaultSessionsNeverDeleted(t *testing.T) {
	const maxSessions = 10
	dir := t.TempDir()
	m := filepath.Join(dir, "be.yaml")
	writeFile(t, m, faultManifest(t, "be", []string{"-tools", "1"}, quick))
	tt, ep := startTetherServing(t, dir, "--max-sessions", fmt.Sprint(maxSessions))
	waitStatus(t, m, "be", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	s := connectClient(t, ep)
	if _, err := call(s, 10*time.Second, "be_echo", map[string]any{"text": "x"}); err != nil {
		t.Fatal(err)
	}
	before, _ := metricValue(scrape(t, ep), "go_goroutines")

	for i := range 300 {
		rawInitBody(t, ep.gateway, leakyInitializeBodies[i%len(leakyInitializeBodies)])
		// The live client uses its session now and then: it is never the
		// least recently used.
		if _, err := call(s, 10*time.Second, "be_echo", map[string]any{"text": "x"}); err != nil {
			t.Fatalf("the live client's call among the leaked sessions: %v", err)
		}
	}
	after, _ := metricValue(scrape(t, ep), "go_goroutines")
	if after > before+4*maxSessions {
		t.Errorf("goroutines grew from %v to %v over 300 sessions never deleted (bound %d)", before, after, maxSessions)
	}
	tt.waitLog(t, 10*time.Second, "gateway closed its least recently used idle sessions")
	if n := strings.Count(tt.logs.String(), "gateway closed its least recently used idle sessions"); n != 1 {
		t.Errorf("%d eviction WARN lines for 290 evictions, want 1", n)
	}

	// A tools change reaches the held sessions with no line per session.
	res, err := s.ListTools(context.Background(), nil)
	must(t, err)
	want := len(res.Tools) + 1
	writeFile(t, m, faultManifest(t, "be", []string{"-tools", "2"}, quick))
	waitTools := time.Now().Add(20 * time.Second)
	for {
		res, err := s.ListTools(context.Background(), nil)
		if err == nil && len(res.Tools) == want {
			break
		}
		if time.Now().After(waitTools) {
			t.Fatalf("the tools change never reached the client: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := strings.Count(tt.logs.String(), "list_changed"); n > 2 {
		t.Errorf("a tools change logged %d lines about list_changed, want at most one per change", n)
	}
}

// TestFaultClientNeverReads: a client opens its session's stream and never
// reads it while a backend floods log messages (row C4). The client loses
// its stream (a WARN says so), tether's memory stays bounded, and another
// client is served meanwhile.
func TestFaultClientNeverReads(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "be.yaml")
	writeFile(t, m, faultManifest(t, "be", []string{"-log-flood", "65536"}, quick))
	tt, ep := startTetherServing(t, dir, "--stream-write-timeout", "2s")
	waitStatus(t, m, "be", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))

	sid := rawInit(t, ep.gateway)
	if code, body, _ := postRaw(t, ep.gateway, `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`, sid); code != http.StatusOK {
		t.Fatalf("logging/setLevel: %d %s", code, body)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(ep.gateway, "http://"), "/mcp")
	c, err := net.Dial("tcp", addr)
	must(t, err)
	defer c.Close()
	_, err = fmt.Fprintf(c, "GET /mcp HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-06-18\r\n\r\n", addr, sid)
	must(t, err)
	// ... and never reads.

	s := connectClient(t, ep)
	if _, err := call(s, 10*time.Second, "be_echo", map[string]any{"text": "x"}); err != nil {
		t.Fatalf("another client's call while one does not read: %v", err)
	}
	tt.waitLog(t, 60*time.Second, "gateway closed a session's stream: its client did not read it")

	// The flood goes on: tether's memory does not grow with it.
	peak := 0
	for range 50 {
		peak = max(peak, rssKB(t, tt.cmd.Process.Pid))
		time.Sleep(100 * time.Millisecond)
	}
	if peak > 200<<10 {
		t.Errorf("tether's RSS reached %d MB under a flood no client reads", peak>>10)
	}
	if _, err := call(s, 10*time.Second, "be_echo", map[string]any{"text": "y"}); err != nil {
		t.Fatalf("another client's call after: %v", err)
	}
}

// TestFaultStreamsHoldEveryConnection: sessions that each hold their
// standalone stream (GET) fill --max-connections (row C9); a new client
// still initializes and calls, the oldest streams being closed for it (an
// MCP client opens its stream again). Every new connection was refused:
// the client's POST got EOF.
func TestFaultStreamsHoldEveryConnection(t *testing.T) {
	const maxConn = 4
	dir := t.TempDir()
	m := filepath.Join(dir, "be.yaml")
	writeFile(t, m, faultManifest(t, "be", nil, quick))
	tt, ep := startTetherServing(t, dir, "--max-connections", fmt.Sprint(maxConn))
	waitStatus(t, m, "be", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))

	addr := strings.TrimSuffix(strings.TrimPrefix(ep.gateway, "http://"), "/mcp")
	streams := make([]net.Conn, 0, maxConn)
	defer func() {
		for _, c := range streams {
			c.Close()
		}
	}()
	for range maxConn {
		sid := rawInit(t, ep.gateway)
		c, err := net.Dial("tcp", addr)
		must(t, err)
		streams = append(streams, c)
		_, err = fmt.Fprintf(c, "GET /mcp HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-06-18\r\n\r\n", addr, sid)
		must(t, err)
		// The stream is served (its headers are out) before the next.
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("opening stream %d: %v %v", len(streams), err, resp)
		}
	}
	// Idle keep-alive connections of rawInit were shed for the streams
	// (or are the first to go): now every held connection is a stream.

	s := connectClient(t, ep)
	res, err := call(s, 10*time.Second, "be_echo", map[string]any{"text": "served"})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("a call with every connection held by a stream: %v %+v", err, res)
	}

	// The oldest stream was closed for the new client.
	_ = streams[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, streams[0]); err != nil {
		t.Errorf("the oldest stream was not closed by tether: %v", err)
	}
	// tether's log reaches the test through a pipe: wait for the line.
	tt.waitLog(t, 10*time.Second, "gateway at its connection bound")
}
