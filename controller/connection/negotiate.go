package connection

import (
	"context"
	"sync"
	"time"
)

// A 2026-07-28 client first asks server/discover, and a server of an older
// protocol refuses it before the client falls back to initialize: one more
// round trip in five, a third of the CPU of a connect on both sides
// (in-process benchmark: 1.9 → 1.3 ms, 1.4 → 0.9 MB allocated). tether
// remembers, per HTTP endpoint, the version such a server agreed to, and
// the next sessions to it start with initialize at that version: what the
// fallback would have sent. When several connect to an endpoint nobody has
// learned yet (a start, a server's restart), one learns and the others wait
// for it a moment. A memory is dropped when a connect that used it fails
// or agrees to another version (settle), and kept for versionMemoTTL, so
// an upgraded server is asked again. It
// also picks the transport (Connector.Connect): unknown and classic
// endpoints start on tether's own (streamable.go), whose first discover
// tells a 2026-07-28 server (errModernServer); that one is learnt at once,
// so the connects waiting for it go straight to the go-sdk's transport.

// versionMemoTTL bounds how long an endpoint's version is trusted.
const versionMemoTTL = 10 * time.Minute

// versionLearnWait bounds how long a connect waits for another one learning
// the same endpoint before it negotiates on its own.
const versionLearnWait = 2 * time.Second

// versionMemo is that memory (Connector.versions); the sessions of one
// Connector to one endpoint share it.
type versionMemo struct {
	mu sync.Mutex
	m  map[string]*endpointVersion
	// learnWait is versionLearnWait but where tests that need a learner
	// waited for, however loaded the machine, set it longer.
	learnWait time.Duration
}

type endpointVersion struct {
	version  string        // as negotiated; "" while learning
	learned  time.Time     // when version was set
	learning chan struct{} // closed when the learner is done; nil once learned
}

// versionFor returns the version to start a session to key with: "" to
// negotiate (server/discover first, on tether's transport), a classic one
// to start with initialize at it, or a 2026-07-28 one, whose server the
// go-sdk's transport connects to (Connector.Connect). And done, which the
// caller must call with the version the session negotiated and whether
// the connect failed (more than once is harmless: a learner's first call
// counts). It may wait up to versionLearnWait (bounded by ctx) for another
// connect learning key.
func (vm *versionMemo) versionFor(ctx context.Context, key string) (version string, done func(negotiated string, failed bool)) {
	for waited := false; ; waited = true {
		vm.mu.Lock()
		e := vm.m[key]
		switch {
		case e != nil && e.learning == nil && time.Since(e.learned) < versionMemoTTL:
			vm.mu.Unlock()
			// A 2026-07-28 version too: server/discover is that server's
			// handshake (nothing to skip), on the go-sdk's transport, and
			// nobody needs to wait to learn that again.
			return e.version, func(negotiated string, failed bool) {
				vm.settle(key, e, negotiated, failed)
			}
		case e != nil && e.learning != nil && !waited:
			ch := e.learning
			vm.mu.Unlock()
			wait := versionLearnWait
			if vm.learnWait > 0 {
				wait = vm.learnWait
			}
			t := time.NewTimer(wait)
			select {
			case <-ch:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			continue
		case e != nil && e.learning != nil:
			// Still learning after the wait: negotiate without waiting
			// longer, and leave the learning to the learner.
			vm.mu.Unlock()
			return "", func(string, bool) {}
		}
		// Nobody knows or learns it: learn it. The learner's done may be
		// called again (Connect tells it when initialize is answered, and
		// when the connect ends): the first call counts, and a failure or
		// another version after it drops what it taught, as for a connect
		// that used the memory (settle).
		e = &endpointVersion{learning: make(chan struct{})}
		vm.m[key] = e
		vm.mu.Unlock()
		var once sync.Once
		return "", func(negotiated string, failed bool) {
			first := false
			once.Do(func() {
				first = true
				vm.learned(key, e, negotiated, failed)
			})
			if !first {
				vm.settle(key, e, negotiated, failed)
			}
		}
	}
}

// learned ends a learner's learning: the version the server negotiated is
// remembered (a 2026-07-28 one so that nobody waits to learn it again, and
// its connects go straight to the go-sdk's transport);
// a failed connect teaches nothing (one that fails after its initialize
// was answered let the waiters go on with the answer's version, and then
// drops it).
func (vm *versionMemo) learned(key string, e *endpointVersion, negotiated string, failed bool) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	close(e.learning)
	if failed || negotiated == "" {
		if vm.m[key] == e {
			delete(vm.m, key)
		}
		return
	}
	e.version, e.learned, e.learning = negotiated, time.Now(), nil
}

// settle drops e, unless it was replaced already, when a connect that used
// or taught it failed, or negotiated another version than it holds: a
// server downgraded on the same URL is learnt again by the next connect,
// whose classic session then runs on tether's transport (a 2026-07-28
// memory sends every connect to the go-sdk's).
func (vm *versionMemo) settle(key string, e *endpointVersion, negotiated string, failed bool) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.m[key] != e {
		return
	}
	if failed || (negotiated != "" && e.learning == nil && negotiated != e.version) {
		delete(vm.m, key)
	}
}
