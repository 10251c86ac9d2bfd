package gateway

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNotifyFailuresFolded: the go-sdk's one WARN per session that a
// notification missed becomes one line with the count; its other lines
// pass as they are.
func TestNotifyFailuresFolded(t *testing.T) {
	var out lockedBuffer
	log := slog.New(newNotifyFailures(slog.NewTextHandler(&out, nil), 10*time.Millisecond)).With("component", "mcp-sdk")
	for range 500 {
		log.Warn("calling notifications/tools/list_changed: rejected by transport: stream not connected")
	}
	log.Warn("calling notifications/prompts/list_changed: rejected")
	log.Error("server session ended with error")
	deadline := time.Now().Add(waitTimeout)
	for strings.Count(out.String(), "\n") < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the folded lines never came:\n%s", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	text := out.String()
	if n := strings.Count(text, "\n"); n != 3 {
		t.Errorf("%d lines, want 3:\n%s", n, text)
	}
	for _, want := range []string{"method=notifications/tools/list_changed sessions=500", "method=notifications/prompts/list_changed sessions=1", `msg="server session ended with error" component=mcp-sdk`} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
}
