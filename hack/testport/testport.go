// Package testport hands tests a TCP port on 127.0.0.1 for a process they
// start that takes its address on the command line.
//
// A port the kernel picked for a listener on port 0 and that the test then
// closes is free again inside the kernel's ephemeral range, where every
// outgoing connection of every test running beside it picks its local
// port: under load one of those takes it before the process binds it, and
// the test fails for nothing. Free picks below that range instead (and
// checks that the port can be bound), so only another Free can collide,
// which the random start per process and the check make unlikely.
package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
)

// The range Free picks from: below Linux's default ephemeral range
// (32768–60999) and above the registered ports tether's defaults use
// (8808, 9464).
const (
	low  = 20000
	high = 32768
)

var (
	mu   sync.Mutex
	next = low + rand.IntN(high-low)
)

// Free returns a port on 127.0.0.1 that nothing listened on a moment ago,
// and fails the test when there is none.
func Free(t testing.TB) int {
	t.Helper()
	p, err := Pick()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Pick is Free for code without a testing.TB. The ports of one process's
// calls differ until the range wraps.
func Pick() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for range high - low {
		p := next
		next++
		if next == high {
			next = low
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free port on 127.0.0.1 in [%d, %d)", low, high)
}
