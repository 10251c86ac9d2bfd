//go:build !linux

package kubetest

import "syscall"

// childSysProcAttr: without Pdeathsig (Linux only), a test binary that dies
// without running its cleanups leaves the control plane running.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{}
}
