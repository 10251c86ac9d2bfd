//go:build unix && !linux

package connection

import (
	"context"
	"errors"
	"sync"
	"syscall"
)

// childSysProcAttr puts the child in its own process group. Only Linux has a
// parent-death signal; elsewhere a child can outlive a tether killed with
// SIGKILL.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupHasLiveMember cannot tell zombies apart without /proc: kill(2) found
// someone, so assume a live member.
func groupHasLiveMember(int) bool { return true }

// groupMembers cannot be listed without /proc.
func groupMembers(int) []int { return nil }

// startTicks needs /proc.
func startTicks(int) (uint64, error) { return 0, errors.New("no /proc") }

// exited needs /proc too.
func exited(int) bool { return false }

// BecomeSubreaper is Linux only.
func BecomeSubreaper() error { return nil }

// reapGroup: without a subreaper there are no orphans of ours to reap.
func reapGroup(int) {}

func registerOwn(int) {}
func forgetOwn(int)   {}

// starting has nothing to guard without a reaper.
var starting sync.RWMutex

// ReapOrphans is Linux only (there is no subreaper elsewhere).
func ReapOrphans(ctx context.Context) { <-ctx.Done() }
