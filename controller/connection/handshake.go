package connection

import (
	"context"
	"fmt"
	"net/url"
	"sync"
)

// handshakesPerHost bounds the handshakes (initialize, then the first
// tools/list) in flight to one HTTP host; the others wait their turn within
// their connect timeout. tether starting with 1,000 manifests would
// otherwise open 1,000 handshakes at once: a host serving many of them
// (one server behind many manifests, or an MCP hub serving many servers
// under one host) gets them as one burst, and tether dials a connection for
// each, most of which it closes right after. At 1,000 connections to 10
// hosts, 16 per host cut tether's RSS from ~130 to ~102 MB and its sockets
// from ~1,600 to ~1,160 (hack/bench), while keeping both CPUs busy. The
// cost is latency to a far host: 50 manifests on one host 100 ms away come
// up in 4 waves instead of 1.
var handshakesPerHost = 16

// handshakes holds the gates of the hosts with a handshake in flight or
// waiting.
var handshakes = &hostGates{gates: map[string]*hostGate{}}

type hostGates struct {
	mu    sync.Mutex
	gates map[string]*hostGate
}

type hostGate struct {
	slots chan struct{}
	users int // holders and waiters; the gate is dropped at 0
}

// hostOf is the gate key of an endpoint: scheme and host (with port).
func hostOf(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return endpoint
	}
	return u.Scheme + "://" + u.Host
}

// acquire waits for a handshake slot to host. The returned release gives
// it back; calling it more than once is harmless.
func (h *hostGates) acquire(ctx context.Context, host string, limit int) (release func(), err error) {
	h.mu.Lock()
	g := h.gates[host]
	if g == nil {
		g = &hostGate{slots: make(chan struct{}, max(limit, 1))}
		h.gates[host] = g
	}
	g.users++
	h.mu.Unlock()
	leave := func() {
		h.mu.Lock()
		if g.users--; g.users == 0 {
			delete(h.gates, host)
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
			return nil, fmt.Errorf("waiting for one of the %d handshakes in flight to this host to end: %w", cap(g.slots), context.Cause(ctx))
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

// inFlight reports the handshakes in flight to host and those waiting
// (tests).
func (h *hostGates) inFlight(host string) (holding, waiting int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.gates[host]
	if g == nil {
		return 0, 0
	}
	return len(g.slots), g.users - len(g.slots)
}
