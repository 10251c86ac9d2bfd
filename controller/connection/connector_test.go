//go:build unix

package connection

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Two Connectors share nothing: sessions of one do not hold the other's
// tool definitions, and what one learnt of an endpoint's protocol version
// the other asks again. Within one Connector both are shared.
func TestConnectorsShareNothing(t *testing.T) {
	one, other := newConnector(t), newConnector(t)
	tools := toolServer(t, "same")
	a := connectWith(t, one, Request{Spec: httpSpec(tools, "")})
	b := connectWith(t, one, Request{Spec: httpSpec(tools, "")})
	c := connectWith(t, other, Request{Spec: httpSpec(tools, "")})
	if len(a.Tools()) != 1 || len(b.Tools()) != 1 || len(c.Tools()) != 1 {
		t.Fatalf("tools: %d, %d, %d", len(a.Tools()), len(b.Tools()), len(c.Tools()))
	}
	if a.Tools()[0] != b.Tools()[0] {
		t.Error("two sessions of one Connector hold two copies of one definition")
	}
	if a.Tools()[0] == c.Tools()[0] {
		t.Error("sessions of two Connectors share a definition")
	}
	// One learns for the first Connector (its second session uses the
	// memory), one for the other.
	url, sent := methodServer(t, false)
	connectWith(t, one, Request{Spec: httpSpec(url, "")})
	connectWith(t, one, Request{Spec: httpSpec(url, "")})
	connectWith(t, other, Request{Spec: httpSpec(url, "")})
	if n := len(sent("server/discover")); n != 2 {
		t.Errorf("server/discover sent %d times, want 2: once per Connector", n)
	}
	one.handshakes.mu.Lock()
	n := len(one.handshakes.gates)
	one.handshakes.mu.Unlock()
	if n != 0 {
		t.Errorf("%d gates left on the Connector after its handshakes", n)
	}
}

// persistConns counts the goroutines of the HTTP client's connections
// (net/http's persistConn read and write loops, two per connection) that
// run now, in every transport of the process.
func persistConns() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "net/http.(*persistConn).") {
			count++
		}
	}
	return count
}

// A session from the package-level Connect has a Connector of its own,
// which its Close lets go: the connections its transport kept idle are
// closed then, not 90 s later (the transport's IdleConnTimeout), so that
// one-off sessions in a loop (tether login, tests) leave nothing running.
func TestConnectReleasesItsOwnConnector(t *testing.T) {
	url := toolServer(t, "one-off")
	before := persistConns()
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		s, err := Connect(ctx, Request{Name: "one-off", Spec: httpSpec(url, ""), Logger: testLogger(t)})
		cancel()
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	waitUntil(t, "the closed sessions' connections gone", func() bool { return persistConns() <= before })
}
