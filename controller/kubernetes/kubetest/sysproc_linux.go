package kubetest

import "syscall"

// childSysProcAttr has the kernel SIGKILL a control-plane process when the
// test binary dies, even by SIGKILL or a -timeout panic that skips the
// cleanups: an orphaned kube-apiserver would hold ~300 MB and its ports.
// See process.run for why the starting thread stays locked.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
