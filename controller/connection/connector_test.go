//go:build unix

package connection

import (
	"testing"
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
