package connection

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// On a streamable session of a protocol with ping, the health probe is a
// ping sent beside the go-sdk (pingRaw), with an id of tether's own that
// cannot clash with the go-sdk's integer ids.
func TestProbePingsRaw(t *testing.T) {
	url, sent := methodServer(t, false)
	s := connect(t, Request{Spec: httpSpec(url, "")})
	if v := s.Server().ProtocolVersion; v >= protocol2026 {
		t.Fatalf("negotiated %s: this test needs a protocol with ping", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 3 {
		if err := s.Probe(ctx); err != nil {
			t.Fatalf("Probe: %v", err)
		}
	}
	pings := sent("ping")
	if len(pings) != 3 {
		t.Fatalf("server saw %d pings, want 3", len(pings))
	}
	for _, p := range pings {
		if !bytes.Contains(p, []byte(`"id":"tether-ping-`)) {
			t.Errorf("ping not sent beside the go-sdk: %s", p)
		}
	}
}
