package connection

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// waitGroupStopped waits until every thread of every process in process
// group pgid is stopped. kill(SIGSTOP) returns before the group stop is
// done: the kernel wakes one thread to start it, and on a loaded machine
// another thread of the process can still read a request and answer it
// meanwhile.
func waitGroupStopped(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		running, members := groupRunning(pgid)
		if members > 0 && running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d: %d of %d processes still have a running thread 10 s after SIGSTOP", pgid, running, members)
		}
		time.Sleep(time.Millisecond)
	}
}

// groupRunning counts the live processes of group pgid and those of them
// with a thread that is not stopped.
func groupRunning(pgid int) (running, members int) {
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, stat := range procs {
		state, pg, ok := readStat(stat)
		if !ok || pg != pgid || state == 'Z' || state == 'X' {
			continue
		}
		members++
		tasks, _ := filepath.Glob(filepath.Join(filepath.Dir(stat), "task", "*", "stat"))
		for _, task := range tasks {
			if st, _, ok := readStat(task); ok && st != 'T' && st != 't' && st != 'Z' && st != 'X' {
				running++
				break
			}
		}
	}
	return running, members
}

// readStat reads the state and process group of a /proc stat file.
func readStat(path string) (state byte, pgid int, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) state ppid pgrp ...": comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(string(f[2]))
	return f[0][0], pg, err == nil
}
