package gateway

//lint:file-ignore SA1019 relaying the logging level (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// levelBackend is a backend that records the logging level it was asked
// for, and the level in force when a call reached it; SetLogLevel waits
// for hold.
type levelBackend struct {
	fakeBackend
	hold    chan struct{}
	asked   chan struct{} // SetLogLevel was entered
	level   atomic.Value  // mcp.LoggingLevel in force
	atCall  chan mcp.LoggingLevel
	entered atomic.Bool // a call reached the backend
}

func newLevelBackend(hold chan struct{}) *levelBackend {
	b := &levelBackend{hold: hold, asked: make(chan struct{}, 8), atCall: make(chan mcp.LoggingLevel, 8)}
	b.level.Store(mcp.LoggingLevel(""))
	b.tools = []*mcp.Tool{{Name: "t", InputSchema: map[string]any{"type": "object"}}}
	b.prompts = []*mcp.Prompt{{Name: "p"}}
	b.resources = []*mcp.Resource{{Name: "r", URI: "res://r"}}
	return b
}

func (b *levelBackend) SetLogLevel(ctx context.Context, level mcp.LoggingLevel) error {
	b.asked <- struct{}{}
	if b.hold != nil {
		select {
		case <-b.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.level.Store(level)
	return nil
}

func (b *levelBackend) CallTool(ctx context.Context, p *mcp.CallToolParams, progress func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	b.reached()
	return b.fakeBackend.CallTool(ctx, p, progress)
}

func (b *levelBackend) GetPrompt(ctx context.Context, p *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	b.reached()
	return b.fakeBackend.GetPrompt(ctx, p)
}

func (b *levelBackend) ReadResource(ctx context.Context, p *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	b.reached()
	return b.fakeBackend.ReadResource(ctx, p)
}

// reached records the level in force when a request reached the backend.
func (b *levelBackend) reached() {
	b.entered.Store(true)
	b.atCall <- b.level.Load().(mcp.LoggingLevel)
}

// waitingForLevel reports whether a goroutine waits in awaitLevel.
func waitingForLevel() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Contains(string(buf[:n]), "(*target).awaitLevel")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A logging level a client set before its backend reconnected is in force
// on the new session before the client's first request reaches it (a
// tool call, prompts/get, resources/read: what a backend serves while it
// may log): the gateway asked the new backend for it on a goroutine of its
// own, and a request that came at once reached the backend first, whose
// log messages for it then went unsent (a classic backend sends none until
// asked for a level). The new backend here answers setLevel only once the
// request is on its way, so the order is forced.
func TestLevelInForceAfterReconnect(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(ctx context.Context, d *downstream) error
	}{
		{"tools/call", func(ctx context.Context, d *downstream) error {
			_, err := d.call(ctx, "a_t", map[string]any{})
			return err
		}},
		{"prompts/get", func(ctx context.Context, d *downstream) error {
			_, err := d.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "a_p"})
			return err
		}},
		{"resources/read", func(ctx context.Context, d *downstream) error {
			_, err := d.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "res://r"})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, hs := newTestGateway(t, Options{})
			first := newLevelBackend(nil)
			g.Set(Connection{Name: "a", Prefix: "a", Backend: first})
			d := dial(t, g, hs)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			if err := d.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
				t.Fatalf("setLevel: %v", err)
			}
			if got := first.level.Load(); got != mcp.LoggingLevel("debug") {
				t.Fatalf("the backend was asked for %q, want debug", got)
			}

			hold := make(chan struct{})
			second := newLevelBackend(hold)
			g.Set(Connection{Name: "a", Prefix: "a", Backend: second}) // a reconnect
			select {
			case <-second.asked:
			case <-ctx.Done():
				t.Fatal("the new backend was never asked for the level")
			}
			errc := make(chan error, 1)
			go func() { errc <- tc.send(ctx, d) }()
			// The request either reaches the backend (the level not yet in
			// force) or waits for the level: only then is setLevel answered.
			for !second.entered.Load() && !waitingForLevel() {
				select {
				case <-ctx.Done():
					t.Fatal("the request neither reached the backend nor waited for the level")
				case <-time.After(5 * time.Millisecond):
				}
			}
			close(hold)
			if err := <-errc; err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got := <-second.atCall; got != "debug" {
				t.Errorf("the %s reached the new backend with the level %q in force, want debug (set before the reconnect)", tc.name, got)
			}
		})
	}
}

// A backend that never answers logging/setLevel after a reconnect costs
// the calls sent meanwhile at most levelWait, not their answers: the
// call goes on without the level and is answered, where it waited its
// whole callTimeout and failed.
func TestLevelWaitIsBounded(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	first := newLevelBackend(nil)
	g.Set(Connection{Name: "a", Prefix: "a", Backend: first})
	d := dial(t, g, hs)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := d.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatalf("setLevel: %v", err)
	}
	never := make(chan struct{}) // setLevel is never answered
	second := newLevelBackend(never)
	g.Set(Connection{Name: "a", Prefix: "a", Backend: second, CallTimeout: 4 * levelWait})
	<-second.asked
	res, err := d.call(ctx, "a_t", map[string]any{})
	if err != nil || res.IsError {
		t.Fatalf("a call while the backend does not answer setLevel: %v %v", err, res)
	}
	if got := <-second.atCall; got != "" {
		t.Errorf("the call reached the backend with the level %q, want none (never answered)", got)
	}
}

// The same backend published again with other tools while its level is on
// its way (a tools/list_changed right after a reconnect): a call that comes
// then waits for the level as well.
func TestLevelAwaitedAfterAToolsChange(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	first := newLevelBackend(nil)
	g.Set(Connection{Name: "a", Prefix: "a", Backend: first})
	d := dial(t, g, hs)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := d.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatalf("setLevel: %v", err)
	}
	hold := make(chan struct{})
	second := newLevelBackend(hold)
	g.Set(Connection{Name: "a", Prefix: "a", Backend: second}) // a reconnect
	<-second.asked
	second.setTools(append(second.Tools(), &mcp.Tool{Name: "u", InputSchema: map[string]any{"type": "object"}}))
	g.Set(Connection{Name: "a", Prefix: "a", Backend: second}) // its tools changed
	errc := make(chan error, 1)
	go func() {
		_, err := d.call(ctx, "a_t", map[string]any{})
		errc <- err
	}()
	for !second.entered.Load() && !waitingForLevel() {
		select {
		case <-ctx.Done():
			t.Fatal("the call neither reached the backend nor waited for the level")
		case <-time.After(5 * time.Millisecond):
		}
	}
	close(hold)
	if err := <-errc; err != nil {
		t.Fatalf("call: %v", err)
	}
	if got := <-second.atCall; got != "debug" {
		t.Errorf("the call reached the backend with the level %q in force, want debug", got)
	}
}

// heldOnceBackend holds the first logging/setLevel it is asked (the one
// Set sends a backend that connected) until release; later ones are
// answered at once.
type heldOnceBackend struct {
	*levelBackend
	calls   atomic.Int32
	release chan struct{}
}

func (b *heldOnceBackend) SetLogLevel(ctx context.Context, level mcp.LoggingLevel) error {
	// Counted before it is told: the ask a test waits for (asked) is the
	// one held, not another that overtook it between.
	first := b.calls.Add(1) == 1
	b.asked <- struct{}{}
	if first {
		select {
		case <-b.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.level.Store(level)
	return nil
}

// A client that changes its level while a backend that just connected is
// asked for the old one: the backend ends with the new level. The client's
// change asked it too (sendLevel) and was answered first; the old level,
// answered after, was left in force until the next change, and the
// client's log messages at the new level never came.
func TestLevelChangedDuringReconnectWins(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	g.Set(Connection{Name: "a", Prefix: "a", Backend: newLevelBackend(nil)})
	d := dial(t, g, hs)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := d.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatalf("setLevel: %v", err)
	}
	second := &heldOnceBackend{levelBackend: newLevelBackend(nil), release: make(chan struct{})}
	g.Set(Connection{Name: "a", Prefix: "a", Backend: second}) // a reconnect: asked for info, held
	<-second.asked
	if err := d.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatalf("setLevel: %v", err)
	}
	if got := second.level.Load(); got != mcp.LoggingLevel("debug") {
		t.Fatalf("after the client's change the backend has %q, want debug", got)
	}
	g.mu.Lock()
	levelSet := g.conns["a"].target.levelSet
	g.mu.Unlock()
	close(second.release) // the reconnect's info answered last
	select {
	case <-levelSet:
	case <-ctx.Done():
		t.Fatal("the reconnect's level was never settled")
	}
	if got := second.level.Load(); got != mcp.LoggingLevel("debug") {
		t.Errorf("the backend ends with the level %q, want debug (the client's latest)", got)
	}
}

// Two clients change their levels at once: the backend ends with the
// level the gateway decided last. The first client's ask is held at the
// backend and answered after the second's; the older level, landing last,
// stayed in force until the next change, and the second client's messages
// at its level never came.
func TestLevelChangesOfTwoClientsEndAtTheLast(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	b := &heldOnceBackend{levelBackend: newLevelBackend(nil), release: make(chan struct{})}
	g.Set(Connection{Name: "a", Prefix: "a", Backend: b})
	first, second := dial(t, g, hs), dial(t, g, hs)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	firstDone := make(chan error, 1)
	go func() { firstDone <- first.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}) }()
	select {
	case <-b.asked: // info, held
	case <-ctx.Done():
		t.Fatal("the backend was never asked for the first client's level")
	}
	if err := second.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatalf("setLevel: %v", err)
	}
	if got := b.level.Load(); got != mcp.LoggingLevel("debug") {
		t.Fatalf("after the second client's change the backend has %q, want debug", got)
	}
	close(b.release) // the first client's info answered last
	if err := <-firstDone; err != nil {
		t.Fatalf("setLevel: %v", err)
	}
	if got := b.level.Load(); got != mcp.LoggingLevel("debug") {
		t.Errorf("the backend ends with the level %q, want debug (the most verbose, decided last)", got)
	}
}

// Two changes of a client's level at once leave the level the backends
// were asked for (levels.sent, which askLevel ends with) at the level the
// clients want after both. Each change decided the level and recorded it
// as sent under two holds of the lock: the older decision, recorded last,
// left every backend at a level no client wanted (a few times in 20,000
// rounds, every run).
func TestLevelSentIsTheLevelWantedAfterChangesAtOnce(t *testing.T) {
	g, _ := newTestGateway(t, Options{})
	client := new(int) // a client of its own, as a fast call is
	for round := range 20000 {
		var wg sync.WaitGroup
		wg.Go(func() { g.setLevel(client, "debug") })
		wg.Go(func() { g.setLevel(client, "error") })
		wg.Wait()
		g.levels.mu.Lock()
		sent, want := g.levels.sent, g.levels.m[client]
		g.levels.mu.Unlock()
		if sent != want {
			t.Fatalf("round %d: the backends were last asked for %q, while the client wants %q", round, sent, want)
		}
	}
}

// A session that sets its level while another change is being decided
// keeps its level: the change read the live sessions before it took the
// lock, took the newer session for one that had ended, and forgot its
// level (the backends were not asked for it, and the fast path wrote the
// session no log messages). The test holds the lock while the change comes
// to it, and a session initializes and records its level then.
func TestLevelOfASessionNewerThanAChangeIsKept(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	first := dial(t, g, hs)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := first.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "error"}); err != nil {
		t.Fatalf("setLevel: %v", err)
	}
	before := map[*mcp.ServerSession]bool{}
	for ss := range g.server.Sessions() {
		before[ss] = true
	}

	g.levels.mu.Lock()
	changed := make(chan struct{})
	go func() { defer close(changed); g.sendLevel() }()
	for !sendLevelWaitsForTheLock() {
		select {
		case <-ctx.Done():
			g.levels.mu.Unlock()
			t.Fatal("the change never came to the lock")
		case <-time.After(time.Millisecond):
		}
	}
	dial(t, g, hs) // initialized while the change waits
	var second *mcp.ServerSession
	for ss := range g.server.Sessions() {
		if !before[ss] {
			second = ss
		}
	}
	if second == nil {
		g.levels.mu.Unlock()
		t.Fatal("the second session is not among the gateway's")
	}
	g.levels.m[second] = "debug" // as setLevel records it, before its own change
	g.levels.mu.Unlock()
	<-changed

	if got := g.level(second); got != "debug" {
		t.Errorf("the second session's level is %q after the change, want debug (it set it)", got)
	}
	g.levels.mu.Lock()
	sent := g.levels.sent
	g.levels.mu.Unlock()
	if sent != "debug" {
		t.Errorf("the backends were last asked for %q, want debug (the second session's)", sent)
	}
}

// sendLevelWaitsForTheLock reports whether a goroutine in sendLevel waits
// for a mutex.
func sendLevelWaitsForTheLock() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			for g := range strings.SplitSeq(string(buf[:n]), "\n\n") {
				if strings.Contains(g, "(*Gateway).sendLevel") && strings.Contains(g, "sync.(*Mutex).Lock") {
					return true
				}
			}
			return false
		}
		buf = make([]byte, 2*len(buf))
	}
}
