package controller

//lint:file-ignore SA1019 the fake session relays logging (deprecated as of 2026-07-28, live on every earlier protocol), as the gateway does

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
)

const onDemandExtra = "  lifecycle: {mode: OnDemand, idleTimeout: 1h}\n"

// A live OnDemand connection that is suspended leaves the gateway.
func TestSuspendedOnDemandLeavesTheGateway(t *testing.T) {
	h := newHarness(t)
	h.conn.push(newFakeSession("a"))
	h.apply("one.yaml", manifestYAML("one", onDemandExtra))
	connectOnce(h, "one.yaml", "one")
	h.reconcile("one") // catalog known now: dormant from here on
	h.apply("one.yaml", manifestYAML("one", onDemandExtra+"  suspend: true\n"))
	h.reconcile("one")
	st := h.statusOf("one.yaml", "one")
	e, ok := h.exposer.get("one")
	t.Logf("phase %s; exposed in gateway: %v (reason off=%q)", st.Phase, ok, h.exposer.off["one"])
	if ok {
		t.Errorf("a suspended connection is still served by the gateway (backend %T)", e.Backend)
	}
}

// OnDemand switched to Always: Wake returns once the gateway serves the new
// session itself (not the OnDemand backend it no longer uses).
func TestWakeAfterOnDemandTurnedOff(t *testing.T) {
	h := newHarness(t)
	s1, s2 := newFakeSession("a"), newFakeSession("a")
	h.conn.push(s1, s2)
	h.apply("one.yaml", manifestYAML("one", onDemandExtra))
	connectOnce(h, "one.yaml", "one")
	h.apply("one.yaml", manifestYAML("one", "")) // Always now
	h.reconcile("one")
	s1.die(errors.New("crash"))
	h.waitEnqueued("one")
	h.reconcile("one") // dropped, backoff
	// A reconciler that steps whenever asked, until the test returns (it
	// writes status files into the test's directory: waited for).
	ctx, cancel := context.WithCancel(context.Background())
	stepped := make(chan struct{})
	defer func() { cancel(); <-stepped }()
	go func() {
		defer close(stepped)
		for {
			select {
			case n := <-h.enqueued:
				_, _ = h.r.Reconcile(context.Background(), n)
			case <-ctx.Done():
				return
			}
		}
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer wcancel()
	start := time.Now()
	err := h.r.Wake(wctx, "one")
	e, _ := h.exposer.get("one")
	t.Logf("Wake: %v after %v; gateway serves %T", err, time.Since(start).Round(time.Millisecond), e.Backend)
	if err != nil {
		t.Errorf("Wake failed although the connection is served again: %v", err)
	}
}

func (s *fakeSession) Listen(wire.Listener)                                {}
func (s *fakeSession) SetLogLevel(context.Context, mcp.LoggingLevel) error { return nil }
func (s *fakeSession) RawProtocolVersion() (string, bool)                  { return "", false }

// expose may set the OnDemand backend while Wake reads it (-race).
func TestWakeWhileTheModeChanges(t *testing.T) {
	h := newHarness(t)
	h.conn.push(newFakeSession("a"))
	h.apply("one.yaml", manifestYAML("one", ""))
	connectOnce(h, "one.yaml", "one")
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = h.r.Wake(ctx, "one")
	}()
	h.apply("one.yaml", manifestYAML("one", onDemandExtra))
	h.reconcile("one")
	<-done
}
