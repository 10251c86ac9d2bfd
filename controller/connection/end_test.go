//go:build unix

package connection

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-mcp/tether/hack/testport"
)

// endRecorder is an OnEnd that checks it runs once, after Done is closed.
type endRecorder struct {
	t     *testing.T
	s     atomic.Pointer[Session]
	calls atomic.Int32
	ended chan struct{}
}

func newEndRecorder(t *testing.T) *endRecorder {
	return &endRecorder{t: t, ended: make(chan struct{}, 4)}
}

func (e *endRecorder) onEnd() {
	if s := e.s.Load(); s != nil {
		select {
		case <-s.Done():
		default:
			e.t.Error("OnEnd ran before Done was closed")
		}
	}
	e.calls.Add(1)
	e.ended <- struct{}{}
}

func (e *endRecorder) wait(within time.Duration) {
	e.t.Helper()
	select {
	case <-e.ended:
	case <-time.After(within):
		e.t.Fatalf("OnEnd not called within %s", within)
	}
}

// OnEnd tells the owner that a session ended, by Close or by itself, once:
// the reconciler relies on it instead of a goroutine per session waiting on
// Done.
func TestOnEnd(t *testing.T) {
	t.Run("close/http", func(t *testing.T) {
		hs := newHeaderServer(t)
		rec := newEndRecorder(t)
		s := connect(t, Request{Spec: httpSpec(hs.URL+"/mcp", ""), OnEnd: rec.onEnd})
		rec.s.Store(s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		rec.wait(time.Second)
		_ = s.Close()
		if n := rec.calls.Load(); n != 1 {
			t.Errorf("OnEnd called %d times, want 1", n)
		}
	})
	t.Run("close/stdio", func(t *testing.T) {
		rec := newEndRecorder(t)
		s := connect(t, Request{Spec: stdioSpec(goEverything(t)), OnEnd: rec.onEnd})
		rec.s.Store(s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		rec.wait(time.Second)
		if n := rec.calls.Load(); n != 1 {
			t.Errorf("OnEnd called %d times, want 1", n)
		}
	})
	t.Run("server restarted/http", func(t *testing.T) {
		// The restarted server answers the next probe "session not
		// found": the call ends the session from its own goroutine.
		port := testport.Free(t)
		argv := []string{goEverything(t), fmt.Sprintf("-http=127.0.0.1:%d", port), "-stateless=false"}
		p := startHTTPPeer(t, port, nil, argv...)
		rec := newEndRecorder(t)
		s := connect(t, Request{Spec: httpSpec(fmt.Sprintf("http://127.0.0.1:%d/mcp", port), ""), OnEnd: rec.onEnd})
		rec.s.Store(s)
		p.kill(t)
		startHTTPPeer(t, port, nil, argv...)
		if _, err := probeWithin(s, time.Second); err == nil {
			t.Fatal("Probe succeeded on a session the restarted server does not know")
		}
		rec.wait(2 * time.Second)
		if s.Err() == nil {
			t.Error("Err is nil after the session ended by itself")
		}
		_ = s.Close()
		if n := rec.calls.Load(); n != 1 {
			t.Errorf("OnEnd called %d times, want 1", n)
		}
	})
}
