//go:build unix && !linux

package main

import "syscall"

// backendSysProcAttr puts a test's backend in its own process group (only
// Linux has a parent-death signal).
func backendSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
