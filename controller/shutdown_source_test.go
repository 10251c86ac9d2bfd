package controller

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/statusfile"
)

// slowSource finishes some work after ctx is done (manifest.Source saving
// the last valid specs of a listing it just told), until released.
type slowSource struct {
	release  chan struct{}
	finished atomic.Bool
}

func (s *slowSource) Run(ctx context.Context, _ func([]string), synced func()) error {
	synced()
	<-ctx.Done()
	<-s.release
	s.finished.Store(true)
	return nil
}

// signalHandler closes seen at the first record whose message is msg.
type signalHandler struct {
	slog.Handler
	msg  string
	once sync.Once
	seen chan struct{}
}

func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}

// TestRunWaitsForItsSource: on shutdown Run returns only once its source
// has stopped, so that what the source is still doing (saving last valid
// specs) is not cut short by the process's exit.
func TestRunWaitsForItsSource(t *testing.T) {
	store := desired.NewStore()
	src := &slowSource{release: make(chan struct{})}
	waiting := &signalHandler{Handler: slog.DiscardHandler, msg: "waiting for the desired-state source to stop", seen: make(chan struct{})}
	ctrl := New(Options{
		Desired: store, Source: src, Status: statusfile.NewWriter(t.TempDir(), "", store.At), Connector: &fakeConnector{},
		Logger: slog.New(waiting), ShutdownTimeout: time.Hour,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned while its source was still running")
	case <-waiting.seen:
	}
	close(src.release)
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	if !src.finished.Load() {
		t.Error("Run returned before its source")
	}
}
