package connection

import (
	"context"
	"sync"
	"syscall"

	"golang.org/x/sys/windows"
)

// childSysProcAttr starts the child suspended, in a process group of its
// own. Suspended, so that adoptChild can put it in its Job Object before it
// runs a single instruction: a child that ran first could start a
// grandchild outside the job, which would then outlive tether. (The other
// way, putting tether itself in a job its children inherit, would give every
// server one job, and one server's tree could not be stopped alone.) Its own
// process group is what a CTRL_BREAK_EVENT is sent to (the SIGTERM of
// killGroup), and keeps a Ctrl-C in tether's console from reaching the
// servers before tether stops them in order.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_SUSPENDED}
}

// groupMembers is used by the process-group ledger, which has nothing to
// find on Windows: a Job Object kills the tree when tether's handle to it
// closes, however tether ends, so no group outlives the tether that
// started it.
func groupMembers(int) []int { return nil }

// startTicks is /proc's; the ledger needs it, Windows does not.
func startTicks(int) (uint64, error) { return 0, windows.ERROR_NOT_SUPPORTED }

// exited is /proc's too.
func exited(int) bool { return false }

// BecomeSubreaper: the Job Object does what the subreaper does on Linux.
func BecomeSubreaper() error { return nil }

// reapGroup: Windows has no zombies to reap.
func reapGroup(int) {}

func registerOwn(int) {}
func forgetOwn(int)   {}

// starting has nothing to guard without a reaper.
var starting sync.RWMutex

// ReapOrphans is Linux only (there is no subreaper elsewhere).
func ReapOrphans(ctx context.Context) { <-ctx.Done() }
