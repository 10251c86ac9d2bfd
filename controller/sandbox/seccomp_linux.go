package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Offsets in struct seccomp_data (linux/seccomp.h): the syscall number,
// the audit architecture, the low 32 bits of the first argument (both
// architectures with a filter are little-endian).
const (
	seccompNr   = 0
	seccompArch = 4
	seccompArg0 = 16
)

// filter is the launcher's seccomp program (docs/security.md): a syscall
// of another ABI than the native one (i386 or x32 on amd64, AArch32 on
// arm64) kills the process; io_uring_setup fails with EPERM, since the
// ring's socket and connect operations are no syscalls the filter sees;
// socket(AF_UNIX, …) fails with EACCES, since before Landlock ABI 9 a
// connect to a socket file is out of Landlock's sight. socketpair stays:
// its sockets are connected to each other and reach nothing else.
// Everything else is allowed. nil where there is no filter for this
// architecture.
func filter() []unix.SockFilter {
	if !filterArch.ok {
		return nil
	}
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: jt, Jf: jf, K: k}
	}
	load := func(off uint32) unix.SockFilter { return stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off) }
	ret := func(k uint32) unix.SockFilter { return stmt(unix.BPF_RET|unix.BPF_K, k) }
	kill := ret(unix.SECCOMP_RET_KILL_PROCESS)
	p := []unix.SockFilter{
		load(seccompArch),
		jeq(filterArch.audit, 1, 0),
		kill,
		load(seccompNr),
	}
	if filterArch.x32 {
		// x32 calls carry the native audit arch and bit 30 in the number.
		p = append(p, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, Jt: 0, Jf: 1, K: x32SyscallBit}, kill)
	}
	return append(p,
		jeq(filterArch.ioUringSetup, 0, 1),
		ret(unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM)),
		jeq(filterArch.socket, 0, 3),
		load(seccompArg0),
		jeq(unix.AF_UNIX, 0, 1),
		ret(unix.SECCOMP_RET_ERRNO|uint32(unix.EACCES)),
		ret(unix.SECCOMP_RET_ALLOW),
	)
}

// x32SyscallBit is __X32_SYSCALL_BIT (asm/unistd.h).
const x32SyscallBit = 0x40000000

// seccompAvailable says whether this kernel takes the filter: an
// architecture it is written for, and seccomp filters whose actions include
// the ones it returns (SECCOMP_GET_ACTION_AVAIL, Linux 4.14).
func seccompAvailable() bool {
	if !filterArch.ok {
		return false
	}
	for _, action := range []uint32{unix.SECCOMP_RET_ERRNO, unix.SECCOMP_RET_KILL_PROCESS, unix.SECCOMP_RET_ALLOW} {
		if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action))); errno != 0 {
			return false
		}
	}
	return true
}

// installFilter installs filter on the calling thread, which must have no
// new privileges; exec hands it to the server, which cannot remove it.
func installFilter() error {
	p := filter()
	if p == nil {
		return fmt.Errorf("seccomp: no filter for %s", runtime.GOARCH)
	}
	prog := unix.SockFprog{Len: uint16(len(p)), Filter: &p[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	runtime.KeepAlive(p)
	return nil
}

// seccompArchInfo is what the filter needs of an architecture: its audit
// arch, whether it has an x32 ABI beside it, and two syscall numbers.
type seccompArchInfo struct {
	ok                   bool
	audit                uint32
	x32                  bool
	socket, ioUringSetup uint32
}
