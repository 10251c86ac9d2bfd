package sandbox

import (
	"fmt"
	"strings"
)

// UnsupportedError says that the kernel cannot enforce a policy fully and
// the manifest did not accept less (bestEffort): status reason
// SandboxUnsupported, Stalled (docs/contract.md §3).
type UnsupportedError struct {
	Missing []string
}

func (e *UnsupportedError) Error() string {
	return "sandbox: this kernel cannot enforce the policy fully: " + strings.Join(e.Missing, "; ") +
		" (set spec.stdio.sandbox.bestEffort: true to run with what it can enforce)"
}

// SandboxUnsupported marks the error for the supervisor, which finds it by
// this method (it does not import this package).
func (e *UnsupportedError) SandboxUnsupported() bool { return true }

// RefusedError says that tether refuses the confinement policy itself: a
// grant or a writable container mount that reaches what tether protects
// (its state directory, its own executable, the manifest tree). When the
// paths as written reach it, no retry can change that, only a new spec:
// status phase Refused, Stalled, reason PolicyRefused (docs/contract.md
// §3). When only a symbolic link makes it reach (Linked), changing the link
// clears it with no new spec, so it is retried with backoff.
type RefusedError struct {
	Field   string // the manifest field: spec.stdio.sandbox.write[0], spec.container.mounts[1]
	Path    string // the path it names, made absolute ("" when the field is no path)
	Problem string // what is wrong with it, and the way out
	Linked  bool   // it reaches only through a symbolic link, which may change
}

func (e *RefusedError) Error() string {
	if e.Path == "" {
		return e.Field + ": " + e.Problem
	}
	return e.Field + ": " + e.Path + " " + e.Problem
}

// PolicyRefused tells the supervisor, which finds the error by this method
// (it does not import this package), whether only a new spec can change
// the answer.
func (e *RefusedError) PolicyRefused() bool { return !e.Linked }

// Kernel is what the running kernel offers the sandbox (DetectKernel).
type Kernel struct {
	ABI int // Landlock ABI version, 0 without Landlock
	// Seccomp: the kernel takes the launcher's seccomp filter, which
	// refuses Unix sockets (socket(AF_UNIX, …)) and io_uring.
	Seccomp bool
	// MPTCP: Multipath TCP is enabled (net.mptcp.enabled). Landlock's TCP
	// rules cover classic TCP only: a socket(…, IPPROTO_MPTCP) connects
	// and binds past them.
	MPTCP bool
}

// Check lists what of p kernel k cannot enforce (nil: all of it). The
// namespaces are checked when the launcher is started (a refused clone).
func Check(p *Plan, k Kernel) []string {
	abi := k.ABI
	var missing []string
	need := func(version int, what string) {
		if abi < version {
			missing = append(missing, fmt.Sprintf("%s (Landlock ABI %d; this kernel has %d)", what, version, abi))
		}
	}
	need(1, "file system rules")
	need(3, "the truncate right")
	need(5, "the device ioctl right")
	need(6, "signal and abstract Unix socket scoping")
	// A connect to a socket file is no open: before ABI 9 Landlock does not
	// see it, and the server reaches every Unix socket its user may (a
	// D-Bus session bus that starts programs unconfined, docker.sock),
	// whatever its grants and network. The seccomp filter refuses it a
	// Unix socket at all, on any ABI.
	if !k.Seccomp {
		need(9, "Unix socket files outside the grants refused (connect to a D-Bus bus, docker.sock): neither Landlock nor the seccomp filter here")
	}
	if p.HandleTCP {
		need(4, "TCP connect and bind rules")
	}
	if p.HandleUDP {
		need(10, "UDP rules: UDP, DNS over UDP included, stays open to every port")
	}
	if p.HandleTCP && k.MPTCP {
		missing = append(missing, "Multipath TCP rules: Landlock filters classic TCP only, and this kernel has MPTCP enabled (net.mptcp.enabled), so an MPTCP socket connects to every port")
	}
	for _, h := range p.Hosts {
		missing = append(missing, fmt.Sprintf("connect %q: Landlock filters ports, not hosts, so the port would be open to every host", h))
	}
	return missing
}
