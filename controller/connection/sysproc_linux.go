package connection

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// childSysProcAttr puts the child in its own process group (so that a stop
// reaches its whole tree) and has the kernel SIGKILL it when tether dies,
// even by SIGKILL. See process.run for why the starting thread stays locked.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// groupHasLiveMember reports whether a process that is not a zombie is in
// process group pgid, from /proc. If /proc cannot be read it assumes so.
func groupHasLiveMember(pgid int) bool {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return true
	}
	return len(groupMembers(pgid)) > 0
}

// groupMembers lists the processes of group pgid that are not zombies.
func groupMembers(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		f, err := statFields(name)
		if err != nil {
			continue // gone meanwhile
		}
		if pg, err := strconv.Atoi(string(f[2])); err != nil || pg != pgid {
			continue
		}
		if state := f[0]; len(state) == 1 && (state[0] == 'Z' || state[0] == 'X') {
			continue
		}
		pid, _ := strconv.Atoi(name)
		out = append(out, pid)
	}
	return out
}

// statFields returns the fields of /proc/PID/stat after "(comm)", which may
// hold spaces and parens: [0] is the state, [2] the pgrp, [19] the start
// time in clock ticks after boot.
func statFields(pid string) ([][]byte, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("unreadable stat")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return nil, errors.New("short stat")
	}
	return f, nil
}

// startTicks is when pid started, in clock ticks after boot.
func startTicks(pid int) (uint64, error) {
	f, err := statFields(strconv.Itoa(pid))
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(string(f[19]), 10, 64)
}

// exited reports whether pid has exited and awaits its reaping (a zombie).
func exited(pid int) bool {
	f, err := statFields(strconv.Itoa(pid))
	return err == nil && (string(f[0]) == "Z" || string(f[0]) == "X")
}

// BecomeSubreaper makes this process a child subreaper
// (PR_SET_CHILD_SUBREAPER): an orphaned descendant, a wrapper's server
// whose wrapper exited, becomes tether's child instead of init's, stays in
// tether's reach and is reaped by it (reapGroup).
func BecomeSubreaper() error {
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	return nil
}

// reapGroup reaps the members of group pgid that are tether's children and
// have exited: orphans re-parented to tether as a subreaper. Call it only
// once the group's leader has been reaped by its own Wait, or this could
// take the leader's exit status from it.
func reapGroup(pgid int) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// Orphans re-parented to tether (it is a subreaper) while their server runs
// are reaped as soon as they exit; tether's own children are left to their
// exec.Cmd. starting is held (read) from a child's start until it is in
// own, so that the reaper, which holds it (write) while it looks, never
// takes a child of tether's own for an orphan.
var (
	starting sync.RWMutex
	ownMu    sync.Mutex
	own      = map[int]bool{}
)

func registerOwn(pid int) {
	ownMu.Lock()
	own[pid] = true
	ownMu.Unlock()
}

func forgetOwn(pid int) {
	ownMu.Lock()
	delete(own, pid)
	ownMu.Unlock()
}

// ReapOrphans reaps, until ctx is done, the exited children tether did not
// start itself: with tether a child subreaper (BecomeSubreaper), a server's
// helper whose parent exited (a daemonising one included, which left the
// server's process group) becomes tether's child, and would stay a zombie.
// It looks whenever a child exits (SIGCHLD) and every 30 s.
func ReapOrphans(ctx context.Context) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		reapOrphansOnce()
		select {
		case <-ctx.Done():
			return
		case <-sig:
		case <-tick.C:
		}
	}
}

func reapOrphansOnce() {
	starting.Lock()
	defer starting.Unlock()
	me := strconv.Itoa(os.Getpid())
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		f, err := statFields(name)
		if err != nil || string(f[1]) != me || string(f[0]) != "Z" {
			continue
		}
		pid, _ := strconv.Atoi(name)
		ownMu.Lock()
		mine := own[pid]
		ownMu.Unlock()
		if mine {
			continue // its exec.Cmd reaps it
		}
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
}
