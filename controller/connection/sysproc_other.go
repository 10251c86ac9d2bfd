//go:build unix && !linux

package connection

import "syscall"

// childSysProcAttr puts the child in its own process group. Only Linux has a
// parent-death signal; elsewhere a child can outlive a tether killed with
// SIGKILL.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupHasLiveMember cannot tell zombies apart without /proc: kill(2) found
// someone, so assume a live member.
func groupHasLiveMember(int) bool { return true }
