package connection

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// On Windows a stdio child's tree is a Job Object, not a process group:
// adoptChild puts the child in a job of its own while it is still
// suspended, so everything it starts is in the job too; the job is created
// with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE and only tether holds a handle to
// it, so when tether ends, however it ends (TerminateProcess included), the
// handle closes and Windows kills the whole tree: Linux's Pdeathsig and
// subreaper in one. A process can leave the job only if the job allows
// breakaway, which this one does not.

// killOnCloseJob creates a job that kills its processes when its last
// handle closes.
func killOnCloseJob() (windows.Handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, fmt.Errorf("creating a job object: %w", err)
	}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		_ = windows.CloseHandle(job)
		return 0, fmt.Errorf("setting kill-on-close on a job object: %w", err)
	}
	return job, nil
}

// procGroup is a child's tree on Windows: its Job Object, held here and
// not looked up by pid, because a pid is reused as soon as its process has
// exited and been waited for: a lookup by pid could stop another server's
// job. The handle is closed once the job is found empty.
type procGroup struct {
	pid int
	// exited is closed once the child (the process group's leader) has been
	// reaped: from then on its pid may name another process, or none.
	exited <-chan struct{}

	mu  sync.Mutex
	job windows.Handle // 0 once closed
	// leader is a handle to the child, held as long as job: Windows does
	// not give a pid to a new process while a handle to the old one is
	// open, so the pid Ctrl-Break goes to cannot name another process in
	// the moment between the child's reaping and exited's closing.
	leader windows.Handle
	// terminated: tether called TerminateJobObject, so an exit code of
	// exitKilled is tether's kill, not the server's own exit code.
	terminated bool
}

// adoptChild puts a child started suspended (childSysProcAttr) in a job of
// its own, then lets it run. On an error the child is still suspended and
// the caller kills it.
func adoptChild(proc *os.Process, exited <-chan struct{}) (*procGroup, error) {
	job, err := killOnCloseJob()
	if err != nil {
		return nil, err
	}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|windows.SYNCHRONIZE, false, uint32(proc.Pid))
	if err == nil {
		err = windows.AssignProcessToJobObject(job, h)
	}
	if err == nil {
		err = resumeProcess(uint32(proc.Pid))
	}
	if err != nil {
		if h != 0 {
			_ = windows.CloseHandle(h)
		}
		_ = windows.CloseHandle(job)
		return nil, fmt.Errorf("putting the server in a job object: %w", err)
	}
	return &procGroup{pid: proc.Pid, exited: exited, job: job, leader: h}, nil
}

// resumeProcess resumes the threads of a process started suspended (one:
// its main thread; os/exec closes the handle CreateProcess returned for it,
// so it is found by a snapshot of the system's threads).
func resumeProcess(pid uint32) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return fmt.Errorf("listing threads: %w", err)
	}
	defer windows.CloseHandle(snap)
	entry := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	resumed := 0
	for err = windows.Thread32First(snap, &entry); err == nil; err = windows.Thread32Next(snap, &entry) {
		if entry.OwnerProcessID != pid {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, entry.ThreadID)
		if err != nil {
			return fmt.Errorf("opening thread %d: %w", entry.ThreadID, err)
		}
		_, err = windows.ResumeThread(th)
		_ = windows.CloseHandle(th)
		if err != nil {
			return fmt.Errorf("resuming thread %d: %w", entry.ThreadID, err)
		}
		resumed++
	}
	if !errors.Is(err, windows.ERROR_NO_MORE_FILES) {
		return fmt.Errorf("listing threads: %w", err)
	}
	if resumed == 0 {
		return fmt.Errorf("process %d has no thread to resume", pid)
	}
	return nil
}

// kill asks the child's tree to stop (SIGTERM: a CTRL_BREAK_EVENT to its
// process group, which reaches it only when it shares tether's console) or
// ends it (SIGKILL: TerminateJobObject, the whole tree). No Ctrl-Break once
// the leader has exited: its pid then leads no group, and
// GenerateConsoleCtrlEvent to a pid that is not a group's may reach every
// process on the console, tether included.
func (g *procGroup) kill(sig syscall.Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sig != syscall.SIGKILL {
		if g.leaderExited() {
			return errors.New("the server has exited: its process group is gone")
		}
		return windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(g.pid))
	}
	if g.job == 0 {
		return errors.New("the job object is closed: its processes are gone")
	}
	g.terminated = true // before: the exit it causes is described from it
	return windows.TerminateJobObject(g.job, exitKilled)
}

// leaderExited reports whether the child has exited (or been reaped).
// Called with g.mu held.
func (g *procGroup) leaderExited() bool {
	select {
	case <-g.exited:
		return true
	default:
	}
	if g.leader == 0 {
		return true
	}
	ev, err := windows.WaitForSingleObject(g.leader, 0)
	return err == nil && ev == windows.WAIT_OBJECT_0
}

// killedByTether reports whether kill(SIGKILL) ended the job.
func (g *procGroup) killedByTether() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.terminated
}

// killGroup is the process-group ledger's, which has nothing to stop on
// Windows (groupMembers finds none): a job has no name to find it by
// after tether ends, and kill-on-close has ended it with tether.
func killGroup(int, syscall.Signal) error {
	return errors.New("no process group to signal on Windows")
}

// groupAlive: see killGroup.
func groupAlive(int) bool { return false }

// exitKilled is the exit code of a tree ended by killGroup(SIGKILL): the
// 128+SIGKILL that a shell and Kubernetes report on Unix.
const exitKilled = 137

// jobAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION.
type jobAccounting struct {
	TotalUserTime, TotalKernelTime                     int64
	ThisPeriodTotalUserTime, ThisPeriodTotalKernelTime int64
	TotalPageFaultCount                                uint32
	TotalProcesses, ActiveProcesses                    uint32
	TotalTerminatedProcesses                           uint32
}

// alive reports whether a process is left in the child's job. An empty
// job is closed: nothing can join it any more.
func (g *procGroup) alive() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job == 0 {
		return false
	}
	var acct jobAccounting
	if err := windows.QueryInformationJobObject(g.job, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&acct)), uint32(unsafe.Sizeof(acct)), nil); err != nil {
		return true // cannot tell: assume so, as without /proc on Unix
	}
	if acct.ActiveProcesses > 0 {
		return true
	}
	_ = windows.CloseHandle(g.job)
	_ = windows.CloseHandle(g.leader)
	g.job, g.leader = 0, 0
	return false
}

// describeExit gives the exit code and a short description: "killed by
// tether" only when tether terminated the job, since a server may exit
// with code 137 by itself.
func (g *procGroup) describeExit(st *os.ProcessState) (int, string) {
	return describeExitCode(st, g.killedByTether())
}

func describeExitCode(st *os.ProcessState, terminated bool) (int, string) {
	if st == nil {
		return -1, "unknown exit"
	}
	if terminated && st.ExitCode() == exitKilled {
		return exitKilled, fmt.Sprintf("killed by tether (exit code %d)", exitKilled)
	}
	return st.ExitCode(), fmt.Sprintf("exit code %d", st.ExitCode())
}
