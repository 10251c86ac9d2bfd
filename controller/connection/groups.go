package connection

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	// RecordedTicks is when the record was written, in clock ticks after
	// boot: with the recording tether's heartbeat, it bounds when a member
	// of the group can have started.
	RecordedTicks uint64 `json:"recordedTicks"`
}

// heartbeat is a running tether's "still alive at", in the ledger's
// directory (heartbeat-<pid>.json): the groups it recorded can have
// gained members only while it ran, give or take heartbeatMargin.
type heartbeat struct {
	Tether      int    `json:"tether"`
	TetherStart uint64 `json:"tetherStart"`
	Ticks       uint64 `json:"ticks"`
}

const (
	// heartbeatEvery is how often a running tether notes it is alive.
	heartbeatEvery = 30 * time.Second
	// heartbeatMargin is how long after its last heartbeat a tether may
	// still have started children, in clock ticks (a heartbeat interval
	// and as much again).
	heartbeatMargin = 2 * uint64(heartbeatEvery/time.Second) * clockTicks
	// clockTicks is USER_HZ, the unit of /proc/PID/stat's start time: 100
	// on every Linux that matters.
	clockTicks = 100
)

// GroupLedger records the process groups of the running children in a
// directory of the state directory, one file each.
type GroupLedger struct {
	dir   string
	files LedgerFiles
	log   *slog.Logger
}

// LedgerFiles is the ledger's directory as it is read: the state
// directory's groups (state.Dir's Files), so that a record is read as
// every file of the state directory is, bounded and only when it is
// tether's alone (docs/contract.md §5a). A planted record would name a
// process group of tether's user for StopLeftovers to kill.
type LedgerFiles interface {
	// Path is the directory's path, where the ledger writes.
	Path() string
	// ReadDir lists the directory.
	ReadDir() ([]fs.DirEntry, error)
	// ReadFile reads one file of it, or says why it may not be used.
	ReadFile(name string) ([]byte, error)
}

// NewGroupLedger returns a ledger that keeps its records in files.
func NewGroupLedger(files LedgerFiles, log *slog.Logger) *GroupLedger {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &GroupLedger{dir: files.Path(), files: files, log: log}
}

func (l *GroupLedger) path(pgid int) string {
	return filepath.Join(l.dir, strconv.Itoa(pgid)+".json")
}

// record notes a child's group; a failure is logged, not fatal: the ledger
// is a help for the next start.
func (l *GroupLedger) record(pgid int) {
	rec := GroupRecord{PGID: pgid, BootID: bootID(), Tether: os.Getpid(), RecordedTicks: nowTicks()}
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
	entries, err := l.files.ReadDir()
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			l.log.Warn("cannot read the process-group ledger", "dir", l.dir, "err", err)
		}
		return nil
	}
	var out []GroupRecord
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), "heartbeat-") {
			continue
		}
		p := filepath.Join(l.dir, e.Name())
		var rec GroupRecord
		data, err := l.files.ReadFile(e.Name())
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

// Heartbeat notes, every heartbeatEvery until ctx is done, that this tether
// still runs (and so may still start children in the groups it records).
func (l *GroupLedger) Heartbeat(ctx context.Context) {
	path := filepath.Join(l.dir, "heartbeat-"+strconv.Itoa(os.Getpid())+".json")
	tick := time.NewTicker(heartbeatEvery)
	defer tick.Stop()
	for {
		hb := heartbeat{Tether: os.Getpid(), Ticks: nowTicks()}
		hb.TetherStart, _ = startTicks(os.Getpid())
		if data, err := json.Marshal(hb); err == nil {
			if err := atomicfile.Write(path, data, 0o600, 0o700); err != nil {
				l.log.Debug("cannot note the process-group ledger's heartbeat", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// lastBeat is the recording tether's last heartbeat, in clock ticks after
// boot; 0 when there is none.
func (l *GroupLedger) lastBeat(rec GroupRecord) uint64 {
	data, err := l.files.ReadFile("heartbeat-" + strconv.Itoa(rec.Tether) + ".json")
	if err != nil {
		return 0
	}
	var hb heartbeat
	if json.Unmarshal(data, &hb) != nil || hb.Tether != rec.Tether || hb.TetherStart != rec.TetherStart {
		return 0
	}
	return hb.Ticks
}

// dropStaleBeats removes the heartbeats of tethers that no longer run.
func (l *GroupLedger) dropStaleBeats() {
	entries, _ := l.files.ReadDir()
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), "heartbeat-")
		if !ok {
			continue
		}
		p := filepath.Join(l.dir, e.Name())
		pid, err := strconv.Atoi(strings.TrimSuffix(name, ".json"))
		if err != nil || pid == os.Getpid() {
			continue
		}
		var hb heartbeat
		if data, err := l.files.ReadFile(e.Name()); err == nil && json.Unmarshal(data, &hb) == nil && alive(hb.Tether, hb.TetherStart) {
			continue
		}
		_ = os.Remove(p)
	}
}

// nowTicks is the time since boot in clock ticks (/proc/uptime).
func nowTicks() uint64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	secs, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return uint64(secs * clockTicks)
}

// StopLeftovers stops the process groups that a previous tether recorded
// and left running (it was killed before it could stop them), and forgets
// every record that names no such group. It returns the groups it stopped.
// A group is stopped only when it is provably the recorded one: the same
// boot, its leader (if alive) started when recorded, every member started
// after the leader and before the recording tether's last heartbeat (and a
// margin), and that tether gone. A group that fails the last test only (a
// member too young: the group's number taken by another after it emptied,
// or a leftover that kept forking) is left running and reported.
func (l *GroupLedger) StopLeftovers(grace time.Duration) []int {
	defer l.dropStaleBeats()
	var stopped []int
	for _, rec := range l.Records() {
		if rec.Tether == os.Getpid() {
			continue // ours (a ledger directory shared by mistake, or a test)
		}
		if alive(rec.Tether, rec.TetherStart) {
			l.log.Warn("the tether that started this process group still runs; leaving it", "pgid", rec.PGID, "tether", rec.Tether)
			continue
		}
		bound := max(rec.RecordedTicks, l.lastBeat(rec)) + heartbeatMargin
		switch leftoverOf(rec, bound) {
		case notLeftover:
			l.forget(rec.PGID)
			continue
		case ambiguous:
			l.log.Warn("a recorded process group has members younger than the tether that recorded it; leaving it running", "pgid", rec.PGID)
			l.forget(rec.PGID)
			continue
		}
		l.log.Warn("stopping a process group a previous tether left running", "pgid", rec.PGID)
		_ = killGroup(rec.PGID, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for groupAlive(rec.PGID) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // polling /proc: there is no event for a group emptying
		}
		if groupAlive(rec.PGID) {
			_ = killGroup(rec.PGID, syscall.SIGKILL)
		}
		stopped = append(stopped, rec.PGID)
		l.forget(rec.PGID)
	}
	return stopped
}

// alive reports whether pid runs and started at start (clock ticks). A
// process that has exited and is not yet reaped (a SIGKILLed tether whose
// parent has not waited for it: its lock is free by then) does not run.
func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	got, err := startTicks(pid)
	return err == nil && got == start && !exited(pid)
}

type verdict int

const (
	notLeftover verdict = iota
	leftover
	ambiguous
)

// leftoverOf tells whether rec's group still has members that are provably
// the recorded group's: same boot, the leader (if alive) the recorded one,
// and every member started after the leader and before bound (clock ticks
// after boot).
func leftoverOf(rec GroupRecord, bound uint64) verdict {
	if rec.BootID == "" || rec.BootID != bootID() {
		return notLeftover // rebooted since: every process of that group is gone
	}
	members := groupMembers(rec.PGID)
	if len(members) == 0 {
		return notLeftover
	}
	young := false
	for _, pid := range members {
		st, err := startTicks(pid)
		if err != nil {
			continue // gone meanwhile
		}
		if pid == rec.PGID && st != rec.LeaderStart {
			return notLeftover // another process got the leader's number
		}
		if st < rec.LeaderStart {
			return notLeftover // older than the group it would belong to
		}
		if st > bound {
			young = true
		}
	}
	if young {
		return ambiguous
	}
	return leftover
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
