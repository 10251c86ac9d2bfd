//go:build unix

package connection

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// killGroup sends sig to the process group led by pid (children are started
// with Setpgid, so their pgid is their pid).
func killGroup(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return errors.New("no process")
	}
	return syscall.Kill(-pid, sig)
}

// groupAlive reports whether any process is left in pid's process group.
func groupAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(-pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return false
	}
	// kill(2) also finds zombies: a grandchild killed after its parent died
	// stays one until init reaps it, which some inits do late (seconds).
	// It is dead all the same.
	return groupHasLiveMember(pid)
}

// describeExit gives the exit code (128+signal for a signalled child, as a
// shell and Kubernetes report it) and a short description.
func describeExit(st *os.ProcessState) (int, string) {
	if st == nil {
		return -1, "unknown exit"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code := 128 + int(ws.Signal())
		return code, fmt.Sprintf("killed by signal %s (exit code %d)", signalName(ws.Signal()), code)
	}
	return st.ExitCode(), fmt.Sprintf("exit code %d", st.ExitCode())
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	default:
		return s.String()
	}
}

// procGroup is a child's tree on Unix: the process group of
// childSysProcAttr, whose pgid is the child's pid.
type procGroup struct{ pid int }

// adoptChild has nothing to do on Unix: the process group of
// childSysProcAttr is the child's tree from its first instruction. The
// group outlives its leader's exit under the same pgid, which no new
// process can take while a member lives.
func adoptChild(proc *os.Process, _ <-chan struct{}) (*procGroup, error) {
	return &procGroup{pid: proc.Pid}, nil
}

func (g *procGroup) kill(sig syscall.Signal) error { return killGroup(g.pid, sig) }

func (g *procGroup) alive() bool { return groupAlive(g.pid) }

func (g *procGroup) describeExit(st *os.ProcessState) (int, string) { return describeExit(st) }
