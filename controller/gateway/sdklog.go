package gateway

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// notifyFailures folds the go-sdk's one WARN per session that a
// notification did not reach (a list_changed sent to every session, most
// of which have no stream open to carry it) into one line per notification
// burst, with the count: with a thousand sessions a tools change would
// otherwise log a thousand lines (docs/reliability.md, row C2).
type notifyFailures struct {
	h      slog.Handler
	window time.Duration
	state  *notifyState // shared by the handlers WithAttrs derives
}

type notifyState struct {
	mu      sync.Mutex
	pending map[string]*notifyBurst // by notification method
}

type notifyBurst struct {
	n     int
	first string // the first failure's message
	level slog.Level
}

// notifyPrefix starts the go-sdk's message for a notification it could not
// deliver: "calling notifications/tools/list_changed: …".
const notifyPrefix = "calling notifications/"

func newNotifyFailures(h slog.Handler, window time.Duration) notifyFailures {
	return notifyFailures{h: h, window: window, state: &notifyState{pending: make(map[string]*notifyBurst)}}
}

func (f notifyFailures) Enabled(ctx context.Context, l slog.Level) bool { return f.h.Enabled(ctx, l) }

func (f notifyFailures) Handle(ctx context.Context, r slog.Record) error {
	rest, ok := strings.CutPrefix(r.Message, notifyPrefix)
	if !ok {
		return f.h.Handle(ctx, r)
	}
	method, _, _ := strings.Cut(rest, ":")
	method = "notifications/" + method
	s := f.state
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.pending[method]; b != nil {
		b.n++
		return nil
	}
	s.pending[method] = &notifyBurst{n: 1, first: r.Message, level: r.Level}
	// The burst is one notification sent to every session in a loop: it
	// ends within the window, and its line goes out then.
	time.AfterFunc(f.window, func() { f.flush(method) })
	return nil
}

func (f notifyFailures) flush(method string) {
	s := f.state
	s.mu.Lock()
	b := s.pending[method]
	delete(s.pending, method)
	s.mu.Unlock()
	if b == nil {
		return
	}
	r := slog.NewRecord(time.Now(), b.level, "gateway sessions did not get a notification (most have no stream open; their clients see the change when they list again)", 0)
	r.AddAttrs(slog.String("method", method), slog.Int("sessions", b.n), slog.String("first", b.first))
	_ = f.h.Handle(context.Background(), r)
}

func (f notifyFailures) WithAttrs(as []slog.Attr) slog.Handler {
	return notifyFailures{h: f.h.WithAttrs(as), window: f.window, state: f.state}
}

func (f notifyFailures) WithGroup(n string) slog.Handler {
	return notifyFailures{h: f.h.WithGroup(n), window: f.window, state: f.state}
}
