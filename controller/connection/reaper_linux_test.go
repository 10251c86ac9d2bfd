package connection

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"
)

// zombiesOf lists the zombie children of this process.
func zombiesOf() []string {
	me := strconv.Itoa(os.Getpid())
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		f, err := statFields(e.Name())
		if err == nil && string(f[0]) == "Z" && string(f[1]) == me {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestReapOrphans: with tether a subreaper, a server's helpers that outlive
// their parent (one that stays in the server's process group, one that
// daemonised with setsid) become tether's children; when they exit they
// are reaped while the server still runs, not left as zombies, and the
// server itself is still reaped by its own Wait.
func TestReapOrphans(t *testing.T) {
	if err := BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ReapOrphans(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	script := `(setsid sh -c 'sleep 0.2' &) ; (sh -c 'sleep 0.2' &) ; sleep 30`
	p, err := startProcess("sh", "/bin/sh", []string{"-c", script}, "", []string{"PATH=" + os.Getenv("PATH")}, newStderrTail(nil), slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(0, 2*time.Second) })
	// The helpers exit after 0.2 s: wait until none of them is a zombie of
	// ours, which takes the reaper.
	deadline := time.Now().Add(10 * time.Second)
	seen := false
	for {
		kids := childrenOfPid(os.Getpid())
		z := zombiesOf()
		if len(kids) > 1 {
			seen = true // the helpers were re-parented to us
		}
		if seen && len(z) == 0 && len(kids) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("children %v, zombies %v (helpers seen re-parented: %v)", kids, z, seen)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.stop(0, 2*time.Second)
	if code, _ := p.exit(); code == nil {
		t.Error("the server was not reaped by its own Wait")
	}
}

// childrenOfPid lists the live or zombie children of pid.
func childrenOfPid(pid int) []string {
	want := strconv.Itoa(pid)
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		f, err := statFields(e.Name())
		if err == nil && string(f[1]) == want {
			out = append(out, e.Name())
		}
	}
	return out
}
