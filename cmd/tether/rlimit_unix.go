//go:build unix

package main

import "syscall"

// descriptorLimit is the process's soft limit of open descriptors
// (RLIMIT_NOFILE).
func descriptorLimit() (uint64, bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false
	}
	return uint64(lim.Cur), true
}
