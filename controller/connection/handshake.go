package connection

import (
	"context"
	"fmt"
	"sync"
)

// DefaultHandshakesPerEndpoint bounds the handshakes (initialize, then the first
// lists of tools, prompts, resources and templates) in flight to one HTTP endpoint (its URL); the others wait
// their turn within their connect timeout. tether starting with 1,000
// manifests would otherwise open 1,000 handshakes at once: a server behind
// many manifests gets them as one burst, and tether dials a connection for
// each, most of which it closes right after. At 1,000 connections to 10
// endpoints, 16 per endpoint cut tether's RSS from ~130 to ~102 MB and its
// sockets from ~1,300 to ~1,120 (hack/bench), while keeping both CPUs
// busy. The cost is latency to a far server: 50 manifests on one URL 100
// ms away come up in 4 waves instead of 1. The key is the URL, not the
// host, so that one hung endpoint of an MCP hub does not hold up the
// hub's other paths.
const DefaultHandshakesPerEndpoint = 16

// endpointGates holds the gates of the endpoints with a handshake in flight
// or waiting (Connector.handshakes).
type endpointGates struct {
	mu    sync.Mutex
	gates map[string]*endpointGate
}

type endpointGate struct {
	slots chan struct{}
	users int // holders and waiters; the gate is dropped at 0
}

// acquire waits for a handshake slot to endpoint. The returned release
// gives it back; calling it more than once is harmless.
func (h *endpointGates) acquire(ctx context.Context, endpoint string, limit int) (release func(), err error) {
	h.mu.Lock()
	g := h.gates[endpoint]
	if g == nil {
		g = &endpointGate{slots: make(chan struct{}, max(limit, 1))}
		h.gates[endpoint] = g
	}
	g.users++
	h.mu.Unlock()
	leave := func() {
		h.mu.Lock()
		if g.users--; g.users == 0 {
			delete(h.gates, endpoint)
		}
		h.mu.Unlock()
	}
	select {
	case g.slots <- struct{}{}:
	default:
		select {
		case g.slots <- struct{}{}:
		case <-ctx.Done():
			leave()
			return nil, fmt.Errorf("waiting to connect: %d handshakes with this endpoint are in flight already: %w", cap(g.slots), context.Cause(ctx))
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-g.slots
			leave()
		})
	}, nil
}
