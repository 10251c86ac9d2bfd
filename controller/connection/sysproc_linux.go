package connection

import "syscall"

// childSysProcAttr puts the child in its own process group (so that a stop
// reaches its whole tree) and has the kernel SIGKILL it when tether dies,
// even by SIGKILL. See process.run for why the starting thread stays locked.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
