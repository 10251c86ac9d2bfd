package main

import "syscall"

// backendSysProcAttr puts a test's backend in its own process group and
// has it die with the test binary.
func backendSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
