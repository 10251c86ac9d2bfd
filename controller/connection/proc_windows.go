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

// jobs maps a child's pid to its job, from adoptChild until groupAlive
// finds the job empty.
var (
	jobsMu sync.Mutex
	jobs   = map[int]windows.Handle{}
)

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

// adoptChild puts a child started suspended (childSysProcAttr) in a job of
// its own, then lets it run. On an error the child is still suspended and
// the caller kills it.
func adoptChild(proc *os.Process) error {
	job, err := killOnCloseJob()
	if err != nil {
		return err
	}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(proc.Pid))
	if err == nil {
		err = windows.AssignProcessToJobObject(job, h)
		_ = windows.CloseHandle(h)
	}
	if err == nil {
		err = resumeProcess(uint32(proc.Pid))
	}
	if err != nil {
		_ = windows.CloseHandle(job)
		return fmt.Errorf("putting the server in a job object: %w", err)
	}
	jobsMu.Lock()
	jobs[proc.Pid] = job
	jobsMu.Unlock()
	return nil
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

func jobOf(pid int) (windows.Handle, bool) {
	jobsMu.Lock()
	defer jobsMu.Unlock()
	job, ok := jobs[pid]
	return job, ok
}

// killGroup asks the child's tree to stop (SIGTERM: a CTRL_BREAK_EVENT to
// its process group, which reaches it only when it shares tether's
// console) or ends it (SIGKILL: TerminateJobObject, the whole tree).
func killGroup(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return errors.New("no process")
	}
	if sig != syscall.SIGKILL {
		return windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(pid))
	}
	job, ok := jobOf(pid)
	if !ok {
		return errors.New("no job object")
	}
	return windows.TerminateJobObject(job, exitKilled)
}

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

// groupAlive reports whether a process is left in the child's job. An
// empty job is closed and forgotten: nothing can join it any more.
func groupAlive(pid int) bool {
	job, ok := jobOf(pid)
	if !ok {
		return false
	}
	var acct jobAccounting
	if err := windows.QueryInformationJobObject(job, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&acct)), uint32(unsafe.Sizeof(acct)), nil); err != nil {
		return true // cannot tell: assume so, as without /proc on Unix
	}
	if acct.ActiveProcesses > 0 {
		return true
	}
	jobsMu.Lock()
	delete(jobs, pid)
	jobsMu.Unlock()
	_ = windows.CloseHandle(job)
	return false
}

// describeExit gives the exit code and a short description.
func describeExit(st *os.ProcessState) (int, string) {
	if st == nil {
		return -1, "unknown exit"
	}
	if st.ExitCode() == exitKilled {
		return exitKilled, fmt.Sprintf("killed by tether (exit code %d)", exitKilled)
	}
	return st.ExitCode(), fmt.Sprintf("exit code %d", st.ExitCode())
}
