package connection

import (
	"errors"
	"os"
	"syscall"

	"github.com/tether-mcp/tether/controller/sandbox"
	"github.com/tether-mcp/tether/spec"
)

// launcherPath is the executable that runs as the launcher: the running
// tether itself (/proc/self/exe names its file even once an upgrade
// replaced or removed it at self), so a launcher and the tether that
// planned for it are one build; self when /proc is not mounted.
func launcherPath(self string) string {
	const running = "/proc/self/exe"
	if _, err := os.Stat(running); err != nil {
		return self
	}
	return running
}

// namespaces makes the launcher's clone create the user and network
// namespaces of a plan that has its own network (none, loopback): the user
// namespace is what lets an unprivileged tether make the network one. The
// user and group map to themselves; for loopback the launcher keeps
// CAP_NET_ADMIN (ambient, dropped before the exec) to bring lo up.
func (c *confinement) namespaces(a *syscall.SysProcAttr) {
	if c == nil || !c.plan.Namespace {
		return
	}
	uid, gid := os.Getuid(), os.Getgid()
	a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	a.GidMappingsEnableSetgroups = false
	if c.plan.LoopbackUp {
		const capNetAdmin = 12
		a.AmbientCaps = []uintptr{capNetAdmin}
	}
}

// namespaceRefused reports whether err is the kernel refusing the
// namespaces (user namespaces disabled or exhausted, or forbidden by an
// LSM).
func namespaceRefused(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EUSERS)
}

// withoutNamespace is the best-effort fallback of a plan whose namespaces
// the kernel refused: the host's network, every TCP and UDP port refused
// by Landlock instead, as far as a kernel with Landlock ABI abi can
// (status.sandbox says what is left: without Landlock, no network rule).
func (c *confinement) withoutNamespace(abi int) error {
	p := *c.plan
	p.Namespace, p.LoopbackUp = false, false
	p.HandleTCP, p.HandleUDP = true, true
	p.ConnectTCP, p.ConnectUDP = nil, nil
	c.plan = &p
	encoded, err := p.Encode()
	if err != nil {
		return err
	}
	c.planEnv = sandbox.PlanEnv + "=" + encoded
	described := p
	described.Network = spec.NetworkConnect // ports refused by Landlock, as connect's
	c.describe = described.Describe([]string{"a network namespace"}, abi)
	return nil
}
