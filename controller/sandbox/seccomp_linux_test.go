package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/tether-mcp/tether/spec"
)

// probeArg makes the test binary the server TestLaunchFilter confines: it
// prints what each attempt returned.
const probeArg = "__probe-seccomp"

func probe() {
	errOf := func(_ int, err error) string {
		if err == nil {
			return "ok"
		}
		return err.Error()
	}
	fmt.Printf("unix=%s\n", errOf(unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)))
	fmt.Printf("inet=%s\n", errOf(unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)))
	_, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	fmt.Printf("socketpair=%s\n", errOf(0, err))
	var params [120]byte // struct io_uring_params
	_, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
	if errno == 0 {
		fmt.Printf("io_uring=ok\n")
	} else {
		fmt.Printf("io_uring=%s\n", errno.Error())
	}
}

// TestLaunchFilter: under the launcher the server gets no Unix socket
// (EACCES) and no io_uring (EPERM); other sockets and socketpair work.
// Without it each attempt is the kernel's own.
func TestLaunchFilter(t *testing.T) {
	if !seccompAvailable() {
		// CI's machines take it: there a wrong answer must not pass
		// as a skip.
		if os.Getenv("CI") == "true" {
			t.Fatal("this kernel does not take the seccomp filter")
		}
		t.Skip("this kernel does not take the seccomp filter")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(&spec.SandboxSpec{Network: spec.NetworkAll, BestEffort: true}, Inputs{Command: self, Path: os.Getenv("PATH")})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, LauncherArg, self, "probe", probeArg)
	cmd.Env = append(os.Environ(), PlanEnv+"="+enc)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("launching the probe: %v\n%s", err, out)
	}
	want := "unix=permission denied\ninet=ok\nsocketpair=ok\nio_uring=operation not permitted\n"
	if string(out) != want {
		t.Errorf("confined probe:\n%s\nwant:\n%s", out, want)
	}
	out, err = exec.Command(self, probeArg).CombinedOutput()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "unix=ok\ninet=ok\nsocketpair=ok\n") {
		t.Errorf("unconfined probe:\n%s\nwant every socket made (the attempts are real)", out)
	}
}

// TestFilterProgram runs the filter on seccomp_data the kernel cannot be
// made to send here: other architectures' and x32's calls.
func TestFilterProgram(t *testing.T) {
	if !filterArch.ok {
		t.Skip("no filter for this architecture")
	}
	var raw []bpf.RawInstruction
	for _, f := range filter() {
		raw = append(raw, bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K})
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatalf("filter does not disassemble: %+v", raw)
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatal(err)
	}
	// The VM loads words big-endian, so the data is written so: the same
	// words the kernel loads from its native seccomp_data.
	run := func(arch, nr, arg0 uint32) uint32 {
		data := make([]byte, 64)
		binary.BigEndian.PutUint32(data[seccompNr:], nr)
		binary.BigEndian.PutUint32(data[seccompArch:], arch)
		binary.BigEndian.PutUint32(data[seccompArg0:], arg0)
		// The high half of arg0, which socket's int family ignores.
		binary.BigEndian.PutUint32(data[seccompArg0+4:], 0xffffffff)
		n, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(n)
	}
	const (
		allow = unix.SECCOMP_RET_ALLOW
		kill  = unix.SECCOMP_RET_KILL_PROCESS
	)
	native := filterArch.audit
	for _, tc := range []struct {
		name           string
		arch, nr, arg0 uint32
		want           uint32
	}{
		{"socket(AF_UNIX)", native, filterArch.socket, unix.AF_UNIX, unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)},
		{"socket(AF_INET)", native, filterArch.socket, unix.AF_INET, allow},
		{"socket(AF_NETLINK)", native, filterArch.socket, unix.AF_NETLINK, allow},
		{"io_uring_setup", native, filterArch.ioUringSetup, 1, unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{"socketpair(AF_UNIX)", native, unix.SYS_SOCKETPAIR, unix.AF_UNIX, allow},
		{"read", native, unix.SYS_READ, 0, allow},
		{"another arch's socket", unix.AUDIT_ARCH_I386, 359, unix.AF_UNIX, kill},
		{"another arch's read", unix.AUDIT_ARCH_ARM, 3, 0, kill},
	} {
		if got := run(tc.arch, tc.nr, tc.arg0); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
	if filterArch.x32 {
		if got := run(native, x32SyscallBit|filterArch.socket, unix.AF_UNIX); got != kill {
			t.Errorf("x32 socket(AF_UNIX): %#x, want %#x", got, uint32(kill))
		}
		if got := run(native, x32SyscallBit|unix.SYS_READ, 0); got != kill {
			t.Errorf("x32 read: %#x, want %#x", got, uint32(kill))
		}
	}
}
