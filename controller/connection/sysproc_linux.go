package connection

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
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
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid pgrp ...": comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 {
			continue
		}
		if pg, err := strconv.Atoi(string(f[2])); err != nil || pg != pgid {
			continue
		}
		if state := f[0]; len(state) == 1 && (state[0] == 'Z' || state[0] == 'X') {
			continue
		}
		return true
	}
	return false
}
