package connection

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// endless is "data: " followed by 'a' forever, up to limit bytes.
type endless struct{ n, limit int }

func (e *endless) Read(p []byte) (int, error) {
	if e.n >= e.limit {
		return 0, errors.New("reader gave up")
	}
	if e.n == 0 {
		e.n = copy(p, "data: ")
		return e.n, nil
	}
	k := min(len(p), e.limit-e.n)
	for i := range p[:k] {
		p[i] = 'a'
	}
	e.n += k
	return k, nil
}

// A server's event is bounded as the go-sdk client bounds one (16 MiB): a
// backend streaming one endless line cannot make a call hold unbounded
// memory.
func TestRawEventBounded(t *testing.T) {
	r := &endless{limit: 2 * maxRawMessage}
	x := &rawExchange{method: "tools/call", id: "x"}
	_, _, _, err := x.readEvents(context.Background(), r)
	if err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("err = %v, want the event refused as too large", err)
	}
	if r.n > maxRawMessage+64<<10 {
		t.Errorf("read %d bytes of one event before refusing it (limit %d)", r.n, maxRawMessage)
	}
}
