package connection

import (
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tether-mcp/tether/controller/atomicfile"
)

// Children that outlive tether.
//
// Each stdio child runs in its own process group and, on Linux, dies with
// tether (PR_SET_PDEATHSIG). A wrapper's grandchild does not: when tether is
// killed with SIGKILL, only a process-group kill by a living tether would
// reach it, and a grandchild that ignores its stdin closing runs on. So:
//
//   - tether run makes itself a child subreaper (BecomeSubreaper): a
//     grandchild whose parent exits is re-parented to tether, not to init,
//     and tether reaps it when it stops the group;
//   - a GroupLedger records every child's process group in the state
//     directory while it runs, and the next tether stops what a previous one
//     left behind (StopLeftovers) before it starts anything.
//
// What only a cgroup guarantees: a process that leaves its group (setsid, a
// daemonising server) escapes both. Run tether under systemd with
// KillMode=mixed or control-group (examples/systemd/tether.service) for
// that.

// GroupRecord is one child's process group as the ledger keeps it.
type GroupRecord struct {
	PGID int `json:"pgid"`
	// LeaderStart is the group leader's start time in clock ticks after
	// boot (/proc/PID/stat), BootID the boot it ran in: together they tell
	// the group from a later one that got the same number.
	LeaderStart uint64 `json:"leaderStart"`
	BootID      string `json:"bootID"`
	// Tether and TetherStart name the tether that started it: a group of a
	// tether still running is not a leftover.
	Tether      int    `json:"tether"`
	TetherStart uint64 `json:"tetherStart"`
}

// GroupLedger records the process groups of the running children in a
// directory of the state directory, one file each.
type GroupLedger struct {
	dir string
	log *slog.Logger
}

// NewGroupLedger returns a ledger that keeps its records in dir.
func NewGroupLedger(dir string, log *slog.Logger) *GroupLedger {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &GroupLedger{dir: dir, log: log}
}

var (
	ledgerMu sync.Mutex
	ledger   *GroupLedger
)

// SetGroupLedger makes l record every child started from now on (nil: none).
// Process groups are the process's: one ledger serves every session.
func SetGroupLedger(l *GroupLedger) {
	ledgerMu.Lock()
	ledger = l
	ledgerMu.Unlock()
}

func currentLedger() *GroupLedger {
	ledgerMu.Lock()
	defer ledgerMu.Unlock()
	return ledger
}

func (l *GroupLedger) path(pgid int) string {
	return filepath.Join(l.dir, strconv.Itoa(pgid)+".json")
}

// record notes a child's group; a failure is logged, not fatal: the ledger
// is a help for the next start.
func (l *GroupLedger) record(pgid int) {
	rec := GroupRecord{PGID: pgid, BootID: bootID(), Tether: os.Getpid()}
	rec.LeaderStart, _ = startTicks(pgid)
	rec.TetherStart, _ = startTicks(os.Getpid())
	data, err := json.Marshal(rec)
	if err == nil {
		err = atomicfile.Write(l.path(pgid), data, 0o600, 0o700)
	}
	if err != nil {
		l.log.Warn("cannot record a child's process group", "pgid", pgid, "err", err)
	}
}

// forget drops a group that is gone.
func (l *GroupLedger) forget(pgid int) {
	if err := os.Remove(l.path(pgid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		l.log.Warn("cannot forget a child's process group", "pgid", pgid, "err", err)
	}
}

// Records returns what the ledger holds. A file that cannot be read is
// reported and removed: it names nothing tether could safely stop.
func (l *GroupLedger) Records() []GroupRecord {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			l.log.Warn("cannot read the process-group ledger", "dir", l.dir, "err", err)
		}
		return nil
	}
	var out []GroupRecord
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(l.dir, e.Name())
		var rec GroupRecord
		data, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(data, &rec)
		}
		if err != nil || rec.PGID <= 1 || e.Name() != strconv.Itoa(rec.PGID)+".json" {
			l.log.Warn("ignoring an unreadable process-group record", "file", p, "err", err)
			_ = os.Remove(p)
			continue
		}
		out = append(out, rec)
	}
	return out
}

// StopLeftovers stops the process groups that a previous tether recorded
// and left running (it was killed before it could stop them), and forgets
// every record that names no such group. It returns the groups it stopped.
// A group is stopped only when it is provably the recorded one: the same
// boot, its leader (if alive) started when recorded, every member started
// no earlier than the leader, and the tether that recorded it gone.
func (l *GroupLedger) StopLeftovers(grace time.Duration) []int {
	var stopped []int
	for _, rec := range l.Records() {
		if rec.Tether == os.Getpid() {
			continue // ours (a ledger directory shared by mistake, or a test)
		}
		if alive(rec.Tether, rec.TetherStart) {
			l.log.Warn("the tether that started this process group still runs; leaving it", "pgid", rec.PGID, "tether", rec.Tether)
			continue
		}
		if !leftoverOf(rec) {
			l.forget(rec.PGID)
			continue
		}
		l.log.Warn("stopping a process group a previous tether left running", "pgid", rec.PGID)
		_ = syscall.Kill(-rec.PGID, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for groupAlive(rec.PGID) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // polling /proc: there is no event for a group emptying
		}
		if groupAlive(rec.PGID) {
			_ = syscall.Kill(-rec.PGID, syscall.SIGKILL)
		}
		stopped = append(stopped, rec.PGID)
		l.forget(rec.PGID)
	}
	return stopped
}

// alive reports whether pid runs and started at start (clock ticks).
func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	got, err := startTicks(pid)
	return err == nil && got == start
}

// leftoverOf reports whether rec's group still has members that are
// provably the recorded group's.
func leftoverOf(rec GroupRecord) bool {
	if rec.BootID == "" || rec.BootID != bootID() {
		return false // rebooted since: every process of that group is gone
	}
	members := groupMembers(rec.PGID)
	if len(members) == 0 {
		return false
	}
	for _, pid := range members {
		st, err := startTicks(pid)
		if err != nil {
			continue // gone meanwhile
		}
		if pid == rec.PGID && st != rec.LeaderStart {
			return false // another process got the leader's number
		}
		if st < rec.LeaderStart {
			return false // older than the group it would belong to
		}
	}
	return true
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
