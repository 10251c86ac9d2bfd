//go:build linux

package main

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestParseBenchOutput(t *testing.T) {
	out := `goos: linux
pkg: github.com/tether-mcp/tether/spec
BenchmarkHash/Hash-2         	  123456	      9876 ns/op	    1234 B/op	      12 allocs/op
BenchmarkGatewayCall/conc=16/work=0-2  2000  614416 ns/op  1628 calls/s  1017 cpu-µs/call
BenchmarkNoProcs   10   5 ns/op
PASS
ok  	github.com/tether-mcp/tether/spec	1.2s
`
	got := parseBenchOutput("spec", out)
	want := []Result{
		{Metric: "spec Hash/Hash", Value: 9876, Unit: "ns/op", Samples: 123456},
		{Metric: "spec Hash/Hash", Value: 1234, Unit: "B/op", Samples: 123456},
		{Metric: "spec Hash/Hash", Value: 12, Unit: "allocs/op", Samples: 123456},
		{Metric: "spec GatewayCall/conc=16/work=0", Value: 614416, Unit: "ns/op", Samples: 2000},
		{Metric: "spec GatewayCall/conc=16/work=0", Value: 1628, Unit: "calls/s", Samples: 2000},
		{Metric: "spec GatewayCall/conc=16/work=0", Value: 1017, Unit: "cpu-µs/call", Samples: 2000},
		{Metric: "spec NoProcs", Value: 5, Unit: "ns/op", Samples: 10},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("result %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestProcReaders reads this process's own /proc entries: RSS is plausible
// and CPU time grows while the process works.
func TestProcReaders(t *testing.T) {
	pid := os.Getpid()
	rss, err := rssBytes(pid)
	if err != nil {
		t.Fatal(err)
	}
	if rss < 1<<20 || rss > 1<<34 {
		t.Errorf("RSS %d bytes is not plausible for a Go test binary", rss)
	}
	c0, err := cpuTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel has charged at least two ticks; bounded so a
	// broken reader fails instead of hanging.
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for {
		for i := range 1_000_000 {
			x += i
		}
		c1, err := cpuTime(pid)
		if err != nil {
			t.Fatal(err)
		}
		if c1-c0 >= 2*time.Second/userHZ {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time did not grow in 10 s of spinning: %v -> %v (x=%d)", c0, c1, x)
		}
	}
	if n := openFDs(pid); n < 3 {
		t.Errorf("openFDs = %d, want at least stdin/stdout/stderr", n)
	}
	if n := threads(pid); n < 1 {
		t.Errorf("threads = %d", n)
	}
}

// TestDescendants starts a shell that starts a sleep: both are found below
// this process, and treeRSS counts them.
func TestDescendants(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	var pids []int
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if pids, err = descendants(os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if len(pids) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("descendants = %v, want the shell and its sleep", pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Contains(pids, cmd.Process.Pid) {
		t.Errorf("descendants %v lack the shell %d", pids, cmd.Process.Pid)
	}
	var grandchild int
	for _, p := range pids {
		if ppid, _, err := parentOf(p); err == nil && ppid == cmd.Process.Pid {
			grandchild = p
		}
	}
	if grandchild == 0 {
		t.Errorf("no process of %v has the shell %d as parent", pids, cmd.Process.Pid)
	}
	own, children, kids, err := treeRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if own <= 0 || children <= 0 || kids < 2 {
		t.Errorf("treeRSS = own %d, children %d over %d processes; want both > 0 over at least 2", own, children, kids)
	}
}

func TestMedianPercentile(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	sorted := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if got := percentile(sorted, 50); got != 5 {
		t.Errorf("p50 = %v, want 5", got)
	}
	if got := percentile(sorted, 99); got != 9 {
		t.Errorf("p99 of 10 = %v, want 9 (nearest rank below)", got)
	}
}

func TestDescribeFS(t *testing.T) {
	mountinfo := `22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
25 22 0:21 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw
26 22 7:0 / /mnt/j rw,relatime shared:5 - ext4 /dev/loop0 rw
27 22 7:1 / /mnt/with\040space rw shared:6 - xfs /dev/loop1 rw
28 22 0:30 / /mnt/jx rw shared:7 - tmpfs tmpfs rw
`
	journaled := func(dev string) bool { return dev == "loop0" }
	for dir, want := range map[string]string{
		"/tmp":              "/tmp: ext4 on /dev/vda, no journal",
		"/dev/shm/x":        "/dev/shm/x: tmpfs",
		"/mnt/j":            "/mnt/j: ext4 on /dev/loop0, journal",
		"/mnt/j/deeper":     "/mnt/j/deeper: ext4 on /dev/loop0, journal",
		"/mnt/jx/y":         "/mnt/jx/y: tmpfs",
		"/mnt/with space/a": "/mnt/with space/a: xfs on /dev/loop1",
		"/mnt/jy":           "/mnt/jy: ext4 on /dev/vda, no journal",
	} {
		if got := describeFS(mountinfo, dir, journaled); got != want {
			t.Errorf("describeFS(%q) = %q, want %q", dir, got, want)
		}
	}
	if got := describeFS("garbage\n", "/tmp", journaled); got != "" {
		t.Errorf("describeFS of an unreadable mountinfo = %q, want \"\"", got)
	}
}
