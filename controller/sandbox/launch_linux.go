package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// DetectKernel is what the running kernel offers: its Landlock ABI,
// whether it takes the launcher's seccomp filter, and whether Multipath TCP
// is enabled (read from /proc/sys; unreadable counts as enabled, the side
// that refuses rather than trusts).
func DetectKernel() Kernel {
	k := Kernel{ABI: ABI(), Seccomp: seccompAvailable(), MPTCP: true}
	if b, err := os.ReadFile("/proc/sys/net/mptcp/enabled"); err == nil {
		k.MPTCP = strings.TrimSpace(string(b)) != "0"
	} else if errors.Is(err, os.ErrNotExist) {
		k.MPTCP = false // a kernel built without MPTCP
	}
	return k
}

// ABI is the running kernel's Landlock ABI version, 0 without Landlock. A
// kernel whose signal scoping has a known bug (errata 2 not fixed) counts as
// ABI 5, as go-landlock does.
func ABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	if v >= 6 {
		if errata, err := ll.LandlockGetErrata(); err != nil || errata&0x2 == 0 {
			return 5
		}
	}
	return v
}

// Launch is the launcher: args are the program, its argv[0] and its
// arguments; the plan is in PlanEnv. It applies the plan and execs the
// program; it returns only on failure, with the exit code (126, as a shell
// has for a command it cannot run), having said why on stderr.
func Launch(args []string) int {
	fmt.Fprintf(os.Stderr, "tether sandbox: %v\n", launch(args))
	return 126
}

// launch returns only when something failed: on success exec replaced the
// process.
func launch(args []string) error {
	if len(args) < 2 {
		return errors.New("launcher: want PROGRAM ARGV0 [ARG...]")
	}
	plan, err := decode(os.Getenv(PlanEnv))
	if err != nil {
		return err
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, PlanEnv+"=") })
	// One thread applies the ruleset and execs: the domain is that thread's,
	// and exec makes it the whole new process's.
	runtime.LockOSThread()
	if plan.LoopbackUp {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("bringing up lo in the server's network namespace: %w", err)
		}
	}
	if err := closeInherited(); err != nil {
		return err
	}
	if err := restrict(plan); err != nil {
		return err
	}
	// The limits are the server's: set before the ruleset, a small
	// openFiles or memory would fail the launcher instead.
	if err := setLimits(plan.Limits); err != nil {
		return err
	}
	// The capability the launcher kept for lo ends here, and so do all of
	// a root tether's: Landlock does not hold a process with
	// CAP_SYS_MODULE or CAP_SYS_RAWIO.
	if err := dropCapabilities(); err != nil {
		return err
	}
	// Last, as it refuses Unix sockets and io_uring to the launcher too.
	// Where the kernel does not take it, Check decided before the start
	// whether that is acceptable, as for the ruleset.
	if seccompAvailable() {
		if err := installFilter(); err != nil {
			return err
		}
	}
	err = syscall.Exec(args[0], args[1:], env)
	if errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("exec %s: %w (does the policy grant it? grants: command)", args[0], err)
	}
	return fmt.Errorf("exec %s: %w", args[0], err)
}

// decode reads PlanEnv's value, strictly: a field this launcher does not
// know is a rule it would not apply.
func decode(s string) (*Plan, error) {
	var p Plan
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return nil, fmt.Errorf("reading the sandbox plan: %w", err)
	}
	if d.More() {
		return nil, errors.New("reading the sandbox plan: more than one JSON value")
	}
	return &p, nil
}

// loopbackUp sets IFF_UP on lo: a new network namespace's lo is down.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// dropCapabilities leaves the thread that execs the server no capability,
// and nothing to regain one by the exec: a uid 0 process (tether run as
// root, or the launcher in its own user namespace) gets at exec the
// permitted set's bounding and inheritable capabilities, so both are
// emptied, with the ambient, effective and permitted sets.
func dropCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capabilities: %w", err)
	}
	// Dropping from the bounding set needs CAP_SETPCAP; without it the
	// launcher has no capability, and with no new privileges an exec
	// gains none (a non-root uid gets nothing from the bounding set).
	if data[0].Effective&(1<<unix.CAP_SETPCAP) != 0 {
		for c := 0; ; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			} else if err != nil {
				return fmt.Errorf("capabilities: dropping %d from the bounding set: %w", c, err)
			}
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("capabilities: clearing the ambient set: %w", err)
	}
	data = [2]unix.CapUserData{}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capabilities: clearing them: %w", err)
	}
	return nil
}

// closeInherited makes every descriptor but stdin, stdout and stderr close
// at the exec. Landlock does not restrict what is already open: a
// descriptor tether inherited without close-on-exec (from a shell, a
// service manager, a test harness) would hand the server a file, directory
// or socket past its rules.
func closeInherited() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Before Linux 5.11: each open descriptor, from /proc (Landlock is
	// not yet in force).
	entries, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("closing inherited descriptors: %w (close_range: %w)", rerr, err)
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
				return fmt.Errorf("closing inherited descriptor %d: %w", fd, err)
			}
		}
	}
	return nil
}

// setLimits sets soft and hard limits alike: the server cannot raise them.
func setLimits(l Limits) error {
	for _, r := range []struct {
		name     string
		resource int
		value    uint64
	}{{"memory (RLIMIT_AS)", unix.RLIMIT_AS, l.Memory}, {"processes (RLIMIT_NPROC)", unix.RLIMIT_NPROC, l.Processes}, {"openFiles (RLIMIT_NOFILE)", unix.RLIMIT_NOFILE, l.OpenFiles}} {
		if r.value == 0 {
			continue
		}
		if err := unix.Setrlimit(r.resource, &unix.Rlimit{Cur: r.value, Max: r.value}); err != nil {
			return fmt.Errorf("limits: %s %d: %w", r.name, r.value, err)
		}
	}
	return nil
}

// Access rights of a plan's path rights, for directories; a regular file
// gets those of them that apply to files.
const (
	fileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
	readRights = ll.AccessFSReadFile | ll.AccessFSReadDir
	execRights = readRights | ll.AccessFSExecute
	// Write beneath a directory: files and directories made, removed and
	// renamed within it, but no device nodes.
	writeRights = readRights | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeSym | ll.AccessFSRefer
	deviceRights = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
)

// rules are the plan's Landlock rules.
func rules(plan *Plan) ([]landlock.Rule, error) {
	// Build checked this in tether; a server sharing a write grant may
	// have made a link since, and the rules below follow links.
	from := make([]string, len(plan.Paths))
	for i, r := range plan.Paths {
		from[i] = "granting " + r.Path
	}
	if err := noWayOut(plan.Paths, from); err != nil {
		return nil, err
	}
	var out []landlock.Rule
	for _, r := range plan.Paths {
		var access landlock.AccessFSSet
		switch r.Rights {
		case RightRead:
			access = readRights
		case RightExec:
			access = execRights
		case RightWrite:
			access = writeRights
		case RightWriteX:
			access = writeRights | ll.AccessFSExecute
		case RightDevice:
			access = deviceRights
		default:
			return nil, fmt.Errorf("unknown rights %q for %s", r.Rights, r.Path)
		}
		fi, err := os.Stat(r.Path)
		if err != nil {
			return nil, fmt.Errorf("granting %s: %w", r.Path, err)
		}
		if !fi.IsDir() {
			access &= fileRights
		}
		// RODirs and friends would add rights the plan does not grant
		// (RODirs executes): the exact set, downgraded to the kernel's.
		out = append(out, landlock.PathAccess(access, r.Path))
	}
	for _, p := range plan.ConnectTCP {
		out = append(out, landlock.ConnectTCP(p))
	}
	for _, p := range plan.ConnectUDP {
		out = append(out, landlock.ConnectSendUDP(p))
	}
	return out, nil
}

// restrict enforces the plan's Landlock domain on this thread, with no new
// privileges, best effort as to the kernel's ABI (Check decided before the
// start whether that is acceptable).
func restrict(plan *Plan) error {
	rs, err := rules(plan)
	if err != nil {
		return err
	}
	cfg := landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS, Scoped: landlock.V11.Scoped}
	if plan.HandleTCP {
		cfg.HandledAccessNet |= ll.AccessNetBindTCP | ll.AccessNetConnectTCP
	}
	if plan.HandleUDP {
		cfg.HandledAccessNet |= ll.AccessNetBindUDP | ll.AccessNetConnectSendUDP
	}
	fd, flags, err := cfg.BestEffort().NewRulesetFD(rs...)
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if fd < 0 {
		return nil // no Landlock here; the caller accepted that (bestEffort)
	}
	defer unix.Close(fd)
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}
