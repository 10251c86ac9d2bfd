//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat. Linux fixes it
// at 100 for user space (USER_HZ) whatever the kernel's own tick rate.
const userHZ = 100

// rssBytes reads VmRSS of pid from /proc/<pid>/status: the resident memory
// of that process alone, not of its children.
func rssBytes(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(data) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc/%d/status: unexpected VmRSS line %q", pid, line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		return kb << 10, err
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// cpuTime reads the CPU time pid has used so far (utime + stime) from
// /proc/<pid>/stat. Children's time is not included.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields from after its closing parenthesis, where field 3 starts.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// utime and stime are fields 14 and 15, i.e. f[11] and f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime %q %q", pid, f[11], f[12])
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// openFDs counts the file descriptors pid holds.
func openFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// threads reads the thread count of pid.
func threads(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range bytes.Lines(data) {
		if rest, ok := bytes.CutPrefix(line, []byte("Threads:")); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(string(rest)))
			return n
		}
	}
	return -1
}

// loadAvg returns the first three fields of /proc/loadavg, so every run
// records how busy the shared machine was.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return strings.TrimSpace(string(data))
	}
	return strings.Join(f[:3], " ")
}

// raiseNoFile lifts the soft limit on open files to the hard limit, so that
// tether (which inherits it) can hold a thousand connections and their
// streams. It returns the limit now in force.
func raiseNoFile() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, err
		}
	}
	return lim.Cur, nil
}

// cpuWindow measures the CPU pid uses over d, as a fraction of one core.
func cpuWindow(pid int, d time.Duration) (float64, error) {
	c0, err := cpuTime(pid)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	time.Sleep(d)
	c1, err := cpuTime(pid)
	if err != nil {
		return 0, err
	}
	return float64(c1-c0) / float64(time.Since(t0)), nil
}

// descendants returns the pids of every living process below pid (children,
// their children, ...), read from the parent pid field of /proc/<n>/stat.
// Processes that exit while it reads are left out.
func descendants(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		ppid, state, err := parentOf(n)
		if err != nil || state == 'Z' {
			continue // gone, or dead and not yet reaped
		}
		children[ppid] = append(children[ppid], n)
	}
	var out []int
	queue := children[pid]
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		out = append(out, n)
		queue = append(queue, children[n]...)
	}
	return out, nil
}

// parentOf reads the state and parent pid of pid (fields 3 and 4 of
// /proc/<pid>/stat).
func parentOf(pid int) (ppid int, state byte, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no state and parent fields", pid)
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: parent pid %q: %w", pid, f[1], err)
	}
	return ppid, f[0][0], nil
}

// treeRSS sums VmRSS of pid and of every process below it: what a process
// and the children it started hold together. Pages shared between them
// (the same executable mapped by every child) are counted once per
// process, as VmRSS counts them. kids is how many descendants were counted.
func treeRSS(pid int) (own, children int64, kids int, err error) {
	if own, err = rssBytes(pid); err != nil {
		return 0, 0, 0, err
	}
	pids, err := descendants(pid)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, p := range pids {
		b, err := rssBytes(p)
		if err != nil {
			continue // exited since, or a zombie (no VmRSS)
		}
		children += b
		kids++
	}
	return own, children, kids, nil
}
