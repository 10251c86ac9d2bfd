package connection

import (
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tether-mcp/tether/controller/state"
)

// ledgerFiles is the groups directory of a new state directory, made.
func ledgerFiles(t *testing.T) LedgerFiles {
	t.Helper()
	sd, err := state.Open(filepath.Join(t.TempDir(), "state"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sd.Close() })
	files := sd.Files("groups")
	if err := os.MkdirAll(files.Path(), 0o700); err != nil {
		t.Fatal(err)
	}
	return files
}

// startGroup starts `sleep 300` in a process group of its own.
func startGroup(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-done })
	return cmd
}

func writeRecord(t *testing.T, dir string, rec GroupRecord) {
	t.Helper()
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(rec.PGID)+".json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestStopLeftoversStopsOnlyWhatIsProvablyLeftOver: a recorded group is
// stopped only when it is the recorded one (same boot, leader started when
// recorded) and the tether that recorded it is gone; every other record
// is dropped or, for a tether still running, kept.
func TestStopLeftoversStopsOnlyWhatIsProvablyLeftOver(t *testing.T) {
	files := ledgerFiles(t)
	dir := files.Path()
	boot := bootID()
	if boot == "" {
		t.Skip("no /proc/sys/kernel/random/boot_id")
	}
	// A tether that is gone: a process that ran and exited.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadTether := gone.Process.Pid
	gone2 := exec.Command("true")
	if err := gone2.Run(); err != nil {
		t.Fatal(err)
	}
	silentTether := gone2.Process.Pid // gone too, and left no heartbeat

	leftover := startGroup(t)
	reused := startGroup(t)
	otherBoot := startGroup(t)
	stillRunning := startGroup(t)
	liveTether := startGroup(t) // plays a tether that still runs
	start := func(c *exec.Cmd) uint64 {
		st, err := startTicks(c.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	liveStart := start(liveTether)
	now := nowTicks()
	// younger started after the recording tether's last sign of life (and
	// the margin): its group's number may have been taken by another.
	younger := startGroup(t)
	// beating was recorded long ago, but its tether's heartbeat is recent.
	beating := startGroup(t)
	for _, rec := range []GroupRecord{
		{PGID: leftover.Process.Pid, LeaderStart: start(leftover), BootID: boot, Tether: deadTether, RecordedTicks: now},
		{PGID: reused.Process.Pid, LeaderStart: start(reused) - 1, BootID: boot, Tether: deadTether, RecordedTicks: now},
		{PGID: otherBoot.Process.Pid, LeaderStart: start(otherBoot), BootID: "another-boot", Tether: deadTether, RecordedTicks: now},
		{PGID: stillRunning.Process.Pid, LeaderStart: start(stillRunning), BootID: boot, Tether: liveTether.Process.Pid, TetherStart: liveStart, RecordedTicks: now},
		{PGID: younger.Process.Pid, LeaderStart: start(younger), BootID: boot, Tether: silentTether, RecordedTicks: start(younger) - heartbeatMargin - 1},
		{PGID: beating.Process.Pid, LeaderStart: start(beating), BootID: boot, Tether: deadTether, RecordedTicks: start(beating) - heartbeatMargin - 1},
	} {
		writeRecord(t, dir, rec)
	}
	beat, _ := json.Marshal(heartbeat{Tether: deadTether, Ticks: now})
	if err := os.WriteFile(filepath.Join(dir, "heartbeat-"+strconv.Itoa(deadTether)+".json"), beat, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "junk.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}

	l := NewGroupLedger(files, nil)
	stopped := l.StopLeftovers(2 * time.Second)
	slices.Sort(stopped)
	want := []int{leftover.Process.Pid, beating.Process.Pid}
	slices.Sort(want)
	if !slices.Equal(stopped, want) {
		t.Errorf("stopped %v, want the leftovers %v", stopped, want)
	}
	for _, c := range []*exec.Cmd{leftover, beating} {
		if groupAlive(c.Process.Pid) {
			t.Errorf("the leftover group %d still runs", c.Process.Pid)
		}
	}
	for _, c := range []*exec.Cmd{reused, otherBoot, stillRunning, younger} {
		if !groupAlive(c.Process.Pid) {
			t.Errorf("group %d was stopped although it is not provably the recorded one", c.Process.Pid)
		}
	}
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := strconv.Itoa(stillRunning.Process.Pid) + ".json"; len(left) != 1 || left[0] != want {
		t.Errorf("records left: %v, want only %s (its tether still runs)", left, want)
	}
}

// TestLedgerRecordsAndForgetsAChild: a child started while a ledger is set
// is recorded until its group is stopped.
func TestLedgerRecordsAndForgetsAChild(t *testing.T) {
	files := ledgerFiles(t)
	p, err := startProcess("sleep", sleepPath(t), []string{"300"}, "", nil, newStderrTail(nil), slog.New(slog.DiscardHandler), NewGroupLedger(files, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := NewGroupLedger(files, nil).Records()
	if len(recs) != 1 || recs[0].PGID != p.pid || recs[0].Tether != os.Getpid() || recs[0].LeaderStart == 0 || recs[0].BootID == "" {
		t.Fatalf("records = %+v", recs)
	}
	p.stop(10*time.Millisecond, time.Second)
	if recs := NewGroupLedger(files, nil).Records(); len(recs) != 0 {
		t.Errorf("records after the stop = %+v", recs)
	}
}

func sleepPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep on PATH")
	}
	return p
}

// TestStopLeftoversIgnoresUntrustedRecords: a record that would name a
// leftover group (a living group, a tether gone) but that someone else
// could have planted (group-writable, another user's) or that is not a
// regular file is ignored and removed: the group runs on.
func TestStopLeftoversIgnoresUntrustedRecords(t *testing.T) {
	boot := bootID()
	if boot == "" {
		t.Skip("no /proc/sys/kernel/random/boot_id")
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	files := ledgerFiles(t)
	dir := files.Path()
	var victims []*exec.Cmd
	plant := func(fix func(path string) error) {
		c := startGroup(t)
		st, err := startTicks(c.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		writeRecord(t, dir, GroupRecord{PGID: c.Process.Pid, LeaderStart: st, BootID: boot, Tether: gone.Process.Pid, RecordedTicks: nowTicks()})
		if err := fix(filepath.Join(dir, strconv.Itoa(c.Process.Pid)+".json")); err != nil {
			t.Fatal(err)
		}
		victims = append(victims, c)
	}
	plant(func(p string) error { return os.Chmod(p, 0o620) })
	plant(func(p string) error { return os.Chmod(p, 0o602) })
	if os.Geteuid() == 0 {
		plant(func(p string) error { return os.Chown(p, 4242, -1) })
	}
	if stopped := NewGroupLedger(files, nil).StopLeftovers(2 * time.Second); len(stopped) != 0 {
		t.Errorf("stopped %v from records someone else could have planted", stopped)
	}
	for _, c := range victims {
		if !groupAlive(c.Process.Pid) {
			t.Errorf("group %d was stopped", c.Process.Pid)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("untrusted records left: %v", entries)
	}
}

// TestConnectorLedgerRecordsItsChildren: a stdio session of a Connector
// with a ledger has its child's group recorded while it runs, and
// forgotten once it is closed; a Connector without one records nothing.
func TestConnectorLedgerRecordsItsChildren(t *testing.T) {
	files := ledgerFiles(t)
	c := NewConnector(ConnectorOptions{Ledger: NewGroupLedger(files, nil)})
	t.Cleanup(c.Close)
	s := connectWith(t, c, Request{Spec: stdioSpec(goEverything(t))})
	recs := NewGroupLedger(files, nil).Records()
	if len(recs) != 1 || recs[0].PGID != s.proc.pid {
		t.Fatalf("records = %+v, want the child's group %d", recs, s.proc.pid)
	}
	_ = s.Close()
	if recs := NewGroupLedger(files, nil).Records(); len(recs) != 0 {
		t.Errorf("records after the close = %+v", recs)
	}
	connect(t, Request{Spec: stdioSpec(goEverything(t))})
	if recs := NewGroupLedger(files, nil).Records(); len(recs) != 0 {
		t.Errorf("a session of a Connector without a ledger was recorded: %+v", recs)
	}
}

// TestAliveNotAZombie: a process that has exited and is not yet reaped is
// not alive: a tether SIGKILLed a moment ago, whose lock the next tether
// already holds, would otherwise keep its process groups and containers
// running past that start (they were left as a running tether's).
func TestAliveNotAZombie(t *testing.T) {
	self, err := startTicks(os.Getpid())
	if err != nil || !alive(os.Getpid(), self) {
		t.Fatalf("this process is not alive: %v", err)
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start, err := startTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !exited(pid) { // not reaped: cmd.Wait is not called until the end
		if time.Now().After(deadline) {
			t.Fatal("the child never exited")
		}
		time.Sleep(10 * time.Millisecond) // polling /proc: no event for a zombie
	}
	if alive(pid, start) {
		t.Error("a zombie is alive")
	}
	_ = cmd.Wait()
}
