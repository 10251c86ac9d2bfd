package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// fakeOwners hands out one end of a pipe per Dial while it has owners to
// give; the test plays the owner on the other end.
type fakeOwners struct {
	next chan net.Conn
}

func (f *fakeOwners) dial(ctx context.Context) (io.ReadWriteCloser, error) {
	select {
	case c := <-f.next:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	default:
		return nil, errors.New("connection refused")
	}
}

// owner is the test's side of one session.
type owner struct {
	conn  net.Conn
	lines *bufio.Reader
}

func (f *fakeOwners) add() *owner {
	a, b := net.Pipe()
	f.next <- a
	return &owner{conn: b, lines: bufio.NewReader(b)}
}

func (o *owner) read(t *testing.T) string {
	t.Helper()
	_ = o.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	l, err := o.lines.ReadString('\n')
	if err != nil {
		t.Fatalf("owner read: %v", err)
	}
	return strings.TrimSpace(l)
}

func (o *owner) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(o.conn, line+"\n"); err != nil {
		t.Fatalf("owner write: %v", err)
	}
}

// client is the test's side of the client's stdio.
type client struct {
	in    *io.PipeWriter
	out   *bufio.Reader
	outW  *io.PipeWriter
	lines chan string
}

func newClient() (*client, io.Reader, io.Writer) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &client{in: inW, out: bufio.NewReader(outR), outW: outW, lines: make(chan string, 64)}
	go func() {
		for {
			l, err := c.out.ReadString('\n')
			if err != nil {
				close(c.lines)
				return
			}
			c.lines <- strings.TrimSpace(l)
		}
	}()
	return c, inR, outW
}

func (c *client) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		t.Fatalf("client write: %v", err)
	}
}

func (c *client) read(t *testing.T) string {
	t.Helper()
	select {
	case l := <-c.lines:
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("the client got nothing")
		return ""
	}
}

func runBridge(t *testing.T, wait time.Duration) (*fakeOwners, *client, chan error) {
	t.Helper()
	f := &fakeOwners{next: make(chan net.Conn, 4)}
	c, in, out := newClient()
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), Options{Dial: f.dial, In: in, Out: out, Wait: wait}) }()
	return f, c, done
}

const (
	initReq     = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`
	initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// The owner goes with a request in flight: the client gets an error for
// it; what it sends meanwhile is held; the next owner gets the replayed
// initialize (under the bridge's id), initialized, the held request; the
// client is told its lists changed and gets the answer.
func TestBridgeReplaysTheHandshakeAfterTheOwnerWent(t *testing.T) {
	f, c, done := runBridge(t, 10*time.Second)
	first := f.add()
	c.send(t, initReq)
	if got := first.read(t); got != initReq {
		t.Fatalf("owner got %s", got)
	}
	first.send(t, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}`)
	if got := c.read(t); !strings.Contains(got, `"id":1,"result"`) {
		t.Fatalf("client got %s", got)
	}
	c.send(t, initialized)
	first.read(t)
	// Session state the owner keeps: the logging level, subscriptions
	// (one of them ended).
	for i, req := range []string{
		`{"jsonrpc":"2.0","id":10,"method":"logging/setLevel","params":{"level":"debug"}}`,
		`{"jsonrpc":"2.0","id":11,"method":"resources/subscribe","params":{"uri":"a://x"}}`,
		`{"jsonrpc":"2.0","id":12,"method":"resources/subscribe","params":{"uri":"b://y"}}`,
		`{"jsonrpc":"2.0","id":13,"method":"resources/unsubscribe","params":{"uri":"b://y"}}`,
	} {
		c.send(t, req)
		first.read(t)
		first.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, 10+i))
		c.read(t)
	}
	c.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow"}}`)
	first.read(t)
	// A cancelled request is not in flight any more.
	c.send(t, `{"jsonrpc":"2.0","id":"c","method":"tools/call"}`)
	first.read(t)
	c.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c"}}`)
	first.read(t)
	first.conn.Close()
	got := c.read(t)
	if !strings.Contains(got, `"id":2,"error":{"code":-32603`) || !strings.Contains(got, "went away before answering") {
		t.Fatalf("the request in flight was answered %s", got)
	}
	c.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	second := f.add()
	replay := second.read(t)
	if !strings.Contains(replay, `"id":"tether-bridge-replay"`) || !strings.Contains(replay, `"method":"initialize"`) {
		t.Fatalf("the next owner got %s, want the replayed initialize", replay)
	}
	second.send(t, `{"jsonrpc":"2.0","id":"tether-bridge-replay","result":{"protocolVersion":"2025-11-25"}}`)
	if got := second.read(t); got != initialized {
		t.Fatalf("after the replay the owner got %s, want initialized", got)
	}
	level, sub := second.read(t), second.read(t)
	if !strings.Contains(level, `"method":"logging/setLevel"`) || !strings.Contains(level, `"id":"tether-bridge-replay-`) ||
		!strings.Contains(sub, `"uri":"a://x"`) || !strings.Contains(sub, `"id":"tether-bridge-replay-`) {
		t.Fatalf("the session state replayed: %s, %s", level, sub)
	}
	if got := second.read(t); !strings.Contains(got, `"id":3`) {
		t.Fatalf("the held request: owner got %s", got)
	}

	var changed []string
	for range 3 {
		changed = append(changed, c.read(t))
	}
	for i, kind := range []string{"tools", "prompts", "resources"} {
		if want := `{"jsonrpc":"2.0","method":"notifications/` + kind + `/list_changed"}`; changed[i] != want {
			t.Errorf("client notification %d = %s, want %s", i, changed[i], want)
		}
	}
	// The replays' answers are the bridge's: the client never sees them.
	for _, l := range []string{level, sub} {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		second.send(t, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{}}`)
	}
	second.send(t, `{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}`)
	if got := c.read(t); got != `{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}` {
		t.Fatalf("client got %s", got)
	}
	// The client leaves: Run ends, without error.
	c.in.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// A 2026-07-28 client's listen stream is sent again to the next owner,
// not answered with an error, and its list_changed carries the stream's id.
func TestBridgeReopensListenStreams(t *testing.T) {
	f, c, done := runBridge(t, 10*time.Second)
	first := f.add()
	listen := `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`
	c.send(t, listen)
	first.read(t)
	first.conn.Close()
	second := f.add()
	if got := second.read(t); got != listen {
		t.Fatalf("the next owner got %s, want the listen request again", got)
	}
	got := c.read(t)
	if !strings.Contains(got, `"method":"notifications/tools/list_changed"`) || !strings.Contains(got, `"io.modelcontextprotocol/subscriptionId":7`) {
		t.Fatalf("client got %s", got)
	}
	for range 2 {
		c.read(t)
	}
	select {
	case l := <-c.lines:
		t.Fatalf("the listen stream was answered: %s", l)
	default:
	}
	c.in.Close()
	<-done
}

// No owner within the wait: what the client sent is answered with an
// error, and Run returns ErrNoOwner.
func TestBridgeGivesUpWithoutAnOwner(t *testing.T) {
	_, c, done := runBridge(t, 100*time.Millisecond)
	c.send(t, initReq)
	got := c.read(t)
	if !strings.Contains(got, `"id":1,"error"`) || !strings.Contains(got, "no owner answered") {
		t.Errorf("client got %s", got)
	}
	if err := <-done; !errors.Is(err, ErrNoOwner) {
		t.Errorf("Run: %v, want ErrNoOwner", err)
	}
}

// Past MaxHeld messages waiting for an owner, a request is answered with
// an error at once.
func TestBridgeBoundsWhatItHolds(t *testing.T) {
	_, c, done := runBridge(t, 10*time.Second)
	for range MaxHeld {
		c.send(t, `{"jsonrpc":"2.0","method":"notifications/progress"}`)
	}
	c.send(t, `{"jsonrpc":"2.0","id":99,"method":"tools/list"}`)
	if got := c.read(t); !strings.Contains(got, `"id":99,"error"`) || !strings.Contains(got, "already wait") {
		t.Errorf("client got %s", got)
	}
	c.in.Close()
	<-done
}

// A message longer than MaxLine ends the bridge with an error.
func TestBridgeRefusesAnOverlongMessage(t *testing.T) {
	f, c, done := runBridge(t, 10*time.Second)
	f.add()
	go func() {
		_, _ = io.WriteString(c.in, `{"jsonrpc":"2.0","id":1,"method":"x","params":"`+strings.Repeat("a", MaxLine)+`"}`+"\n")
	}()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("Run: %v, want the line limit", err)
	}
}

// A message of exactly MaxLine bytes (its newline included) passes.
func TestBridgeCarriesAMessageAtTheLimit(t *testing.T) {
	f, c, done := runBridge(t, 10*time.Second)
	o := f.add()
	head, tail := `{"jsonrpc":"2.0","method":"x","params":"`, `"}`
	line := head + strings.Repeat("a", MaxLine-len(head)-len(tail)-1) + tail
	go func() { _, _ = io.WriteString(c.in, line+"\n") }()
	if got := o.read(t); len(got) != MaxLine-1 {
		t.Fatalf("the owner got %d bytes, want %d", len(got), MaxLine-1)
	}
	c.in.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// Notifications are never answered: not when the owner goes, not past the
// hold bound.
func TestBridgeNeverAnswersANotification(t *testing.T) {
	f, c, done := runBridge(t, 10*time.Second)
	first := f.add()
	c.send(t, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	first.read(t)
	c.send(t, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	first.read(t)
	first.conn.Close()
	if got := c.read(t); !strings.Contains(got, `"id":5,"error"`) {
		t.Fatalf("client got %s", got)
	}
	select {
	case l := <-c.lines:
		t.Fatalf("the client got a second answer: %s", l)
	case <-time.After(100 * time.Millisecond):
	}
	c.in.Close()
	<-done
}

// A session whose dial completes after the bridge ended (its client left
// meanwhile) is closed, not left open with nobody to read it.
func TestBridgeClosesASessionDialedAfterItEnded(t *testing.T) {
	release := make(chan struct{})
	a, b := net.Pipe()
	dial := func(context.Context) (io.ReadWriteCloser, error) {
		<-release // a dial that does not heed its context
		return a, nil
	}
	c, in, out := newClient()
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), Options{Dial: dial, In: in, Out: out, Wait: time.Minute}) }()
	c.in.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	close(release)
	_ = b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the late session's other end read %v, want EOF (closed by the bridge)", err)
	}
}

// The owner answers an id in its own spelling (the go-sdk reads 1.0 as 1
// and writes a string with its escapes): the request is answered all the
// same, and gets no second, error, answer when the owner goes. One still
// in flight is answered with the id the client wrote.
func TestBridgeMatchesAnswersByIDValue(t *testing.T) {
	f, c, done := runBridge(t, 10*time.Second)
	first := f.add()
	c.send(t, initReq)
	first.read(t)
	first.send(t, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}`)
	c.read(t)
	for _, tc := range []struct{ sent, answered string }{
		{`2.0`, `2`},
		{`"\u0061"`, `"a"`},
		{`"<"`, `"\u003c"`},
	} {
		c.send(t, `{"jsonrpc":"2.0","id":`+tc.sent+`,"method":"ping"}`)
		first.read(t)
		first.send(t, `{"jsonrpc":"2.0","id":`+tc.answered+`,"result":{}}`)
		c.read(t)
	}
	c.send(t, `{"jsonrpc":"2.0","id":7.0,"method":"tools/call","params":{"name":"slow"}}`)
	first.read(t)
	first.conn.Close()
	if got := c.read(t); !strings.Contains(got, `"id":7.0,"error"`) {
		t.Fatalf("the request in flight was answered %s, want an error under its own id", got)
	}
	second := f.add()
	second.read(t) // the replayed initialize
	second.send(t, `{"jsonrpc":"2.0","id":"tether-bridge-replay","result":{"protocolVersion":"2025-11-25"}}`)
	// The next the client hears is that its lists changed: no error for a
	// request that was answered.
	if got := c.read(t); !strings.Contains(got, "list_changed") {
		t.Fatalf("after the owner went the client got %s, want list_changed", got)
	}
	c.in.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// What waits for an owner is bounded in bytes too: a request that would
// take it past MaxHeldBytes is answered with an error at once.
func TestBridgeBoundsTheBytesItHolds(t *testing.T) {
	_, c, done := runBridge(t, 10*time.Second)
	pad := strings.Repeat("x", MaxLine-100)
	for range MaxHeldBytes / MaxLine {
		c.send(t, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"p":"`+pad+`"}}`)
	}
	c.send(t, `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"p":"`+pad+`"}}`)
	if got := c.read(t); !strings.Contains(got, `"id":99,"error"`) || !strings.Contains(got, "already wait") {
		t.Errorf("client got %.200s", got)
	}
	c.in.Close()
	<-done
}
