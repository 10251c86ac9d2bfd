package testport

import (
	"net"
	"strconv"
	"testing"
)

func TestFreeIsBelowTheEphemeralRangeAndBindable(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p := Free(t)
		if p < low || p >= high {
			t.Fatalf("port %d outside [%d, %d)", p, low, high)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d cannot be bound: %v", p, err)
		}
		_ = l.Close()
	}
}

func TestFreeSkipsAPortInUse(t *testing.T) {
	mu.Lock()
	start := next
	mu.Unlock()
	busy, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(start))
	if err != nil {
		t.Skipf("port %d is in use already: %v", start, err)
	}
	defer busy.Close()
	if p := Free(t); p == start {
		t.Fatalf("Free handed out port %d, which a listener holds", p)
	}
}

func TestPickWraps(t *testing.T) {
	mu.Lock()
	next = high - 1
	mu.Unlock()
	a, _ := Pick()
	b, err := Pick()
	if err != nil {
		t.Fatal(err)
	}
	if a != high-1 && a != low {
		t.Fatalf("first pick %d, want %d", a, high-1)
	}
	if b < low || b >= high {
		t.Fatalf("after the wrap: port %d outside [%d, %d)", b, low, high)
	}
}

func TestPickGoesUpFromWhereItIs(t *testing.T) {
	mu.Lock()
	next = low + 100
	mu.Unlock()
	prev := 0
	for range 20 {
		p, err := Pick()
		if err != nil {
			t.Fatal(err)
		}
		if p <= prev || p < low+100 || p >= low+200 {
			t.Fatalf("port %d after %d: want the ports above %d, going up", p, prev, low+100)
		}
		prev = p
	}
}
