package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tether-mcp/tether/controller/supervisor"
)

// gatedConnector's attempts wait for release (or, unless deaf, their
// context), then fail.
type gatedConnector struct {
	started chan struct{}
	release chan struct{}
	deaf    bool // ignores the attempt's context (a hung connect)
}

func (g *gatedConnector) Connect(ctx context.Context, _ supervisor.ConnectRequest) (supervisor.Session, error) {
	select {
	case g.started <- struct{}{}:
	default:
	}
	done := ctx.Done()
	if g.deaf {
		done = nil
	}
	select {
	case <-g.release:
	case <-done:
	}
	return nil, errors.New("refused")
}

// runOnTree runs a controller on a manifest tree of the given files until
// the test ends.
func runOnTree(t *testing.T, files map[string]string, conn supervisor.Connector, connectTimeout time.Duration) *Controller {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctrl := New(onTree(dir, Options{Connector: conn, ConnectTimeout: connectTimeout}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ctrl
}

// TestFirstOutcomes: FirstOutcomes closes once every connection has
// reached its first outcome (a failed attempt; a suspended connection has
// nothing to wait for), not while an attempt is still running.
func TestFirstOutcomes(t *testing.T) {
	conn := &gatedConnector{started: make(chan struct{}, 1), release: make(chan struct{})}
	ctrl := runOnTree(t, map[string]string{
		"a.yaml": manifestYAML("a", ""),
		"b.yaml": manifestYAML("b", "  suspend: true\n"),
	}, conn, time.Hour)
	select {
	case <-conn.started:
	case <-time.After(10 * time.Second):
		t.Fatal("a's first attempt never started")
	}
	select {
	case <-ctrl.FirstOutcomes():
		t.Fatal("closed while a's first attempt runs")
	default:
	}
	close(conn.release)
	select {
	case <-ctrl.FirstOutcomes():
	case <-time.After(10 * time.Second):
		t.Fatal("not closed after a's first attempt failed")
	}
}

// TestFirstOutcomesBounded: a connect that never returns holds
// FirstOutcomes at most the connect timeout after the first sync.
func TestFirstOutcomesBounded(t *testing.T) {
	conn := &gatedConnector{started: make(chan struct{}, 1), release: make(chan struct{}), deaf: true}
	ctrl := runOnTree(t, map[string]string{"a.yaml": manifestYAML("a", "")}, conn, 200*time.Millisecond)
	t.Cleanup(func() { close(conn.release) }) // runs before the controller's shutdown
	<-conn.started
	select {
	case <-ctrl.FirstOutcomes():
	case <-time.After(10 * time.Second):
		t.Fatal("not closed by the connect timeout")
	}
}

// TestOutcomeWait: the wait ends once the names of one listing have all
// reached their first outcome, a name declared while it waited included,
// and a start of 1,000 connections reaching theirs one wake at a time
// lists the names a few times, not at every wake.
func TestOutcomeWait(t *testing.T) {
	declared := []string{"a"}
	reached := map[string]bool{}
	lists := 0
	w := outcomeWait{
		names:   func() []string { lists++; return append([]string(nil), declared...) },
		reached: func(n string) bool { return reached[n] },
	}
	if w.done() {
		t.Fatal("done while a has no outcome")
	}
	declared = append(declared, "b") // declared while a's attempt runs
	reached["a"] = true
	if w.done() {
		t.Fatal("done while b, declared since the first listing, has no outcome")
	}
	reached["b"] = true
	if !w.done() {
		t.Fatal("not done once a and b have their outcomes")
	}

	declared, reached, lists = nil, map[string]bool{}, 0
	for i := range 1000 {
		declared = append(declared, fmt.Sprintf("c-%04d", i))
	}
	w = outcomeWait{names: w.names, reached: w.reached}
	for i, n := range declared {
		if w.done() {
			t.Fatalf("done with %d of %d outcomes", i, len(declared))
		}
		reached[n] = true
	}
	if !w.done() {
		t.Fatal("not done once every name has its outcome")
	}
	if lists > 3 {
		t.Errorf("the names were listed %d times for 1,001 wakes, want at most 3", lists)
	}
}
