package connection

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

// helperEnv makes the test binary act as one of the processes of
// TestTreeDiesWithTether (see TestMain).
const helperEnv = "TETHER_CONNECTION_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "server", "grandchild":
		// Deaf to Ctrl-Break (killGroup's SIGTERM), so that only the
		// Job Object can end them.
		signal.Ignore(os.Interrupt)
	}
	switch os.Getenv(helperEnv) {
	case "tether":
		actAsTether()
	case "server":
		actAsServer()
	case "grandchild":
		runUntilKilled()
	case "exit137":
		os.Exit(exitKilled)
	}
	os.Exit(m.Run())
}

// actAsTether starts a server the way Connect does and prints the pids of
// the server and of the grandchild the server started, then waits to be
// killed.
func actAsTether() {
	server, grandchild, _, err := startTree()
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(server, grandchild)
	runUntilKilled()
}

// actAsServer starts a grandchild, prints its pid on stdout (the stdio
// server's pipe to tether) and waits to be killed.
func actAsServer() {
	self, err := os.Executable() // os.Args[0] is the argv0 tether gave
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=grandchild")
	if err := cmd.Start(); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(cmd.Process.Pid)
	runUntilKilled()
}

// runUntilKilled blocks for ever. Not select {}: with every goroutine
// blocked the runtime calls that a deadlock and exits.
func runUntilKilled() {
	for {
		time.Sleep(time.Hour)
	}
}

// startTree starts the test binary as a stdio server (startProcess, as
// Connect does) that starts a grandchild, and returns both pids.
func startTree() (server, grandchild int, p *process, err error) {
	env := append(childEnv(os.Getenv, nil), helperEnv+"=server")
	p, err = startProcess("server", os.Args[0], []string{"-test.run=^$"}, "", env, newStderrTail(nil), slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		return 0, 0, nil, err
	}
	line, err := bufio.NewReader(p.stdout).ReadString('\n')
	if err != nil {
		return 0, 0, nil, fmt.Errorf("reading the grandchild's pid: %w", err)
	}
	grandchild, err = strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, 0, nil, fmt.Errorf("the server said %q", line)
	}
	return p.pid, grandchild, p, nil
}

// openProcess returns a handle to wait for pid's end with.
func openProcess(t *testing.T, pid int) windows.Handle {
	t.Helper()
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		t.Fatalf("opening process %d: %v", pid, err)
	}
	t.Cleanup(func() {
		_ = windows.TerminateProcess(h, 1)
		_ = windows.CloseHandle(h)
	})
	return h
}

// waitEnded waits up to d for the process behind h to end.
func waitEnded(h windows.Handle, d time.Duration) bool {
	ev, err := windows.WaitForSingleObject(h, uint32(d/time.Millisecond))
	return err == nil && ev == windows.WAIT_OBJECT_0
}

// A stdio server and everything it started die with tether, however
// tether ends: killed with TerminateProcess it closes nothing itself, and
// the grandchild, which is not tether's child, dies all the same (the Job
// Object's kill-on-close).
func TestTreeDiesWithTether(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=tether")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper tether: %v", err)
	}
	var server, grandchild int
	if _, err := fmt.Sscan(line, &server, &grandchild); err != nil {
		t.Fatalf("helper tether said %q", line)
	}
	hs, hg := openProcess(t, server), openProcess(t, grandchild)
	if waitEnded(hg, 0) || waitEnded(hs, 0) {
		t.Fatal("the server's tree ended while its tether ran")
	}

	if err := cmd.Process.Kill(); err != nil { // TerminateProcess
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !waitEnded(hs, 10*time.Second) {
		t.Errorf("server %d still runs 10 s after its tether was killed", server)
	}
	if !waitEnded(hg, 10*time.Second) {
		t.Errorf("grandchild %d still runs 10 s after its tether was killed", grandchild)
	}
}

// Stopping a server ends its whole tree while tether runs on: a server and
// grandchild deaf to stdin's end and to Ctrl-Break are ended by the Job
// Object, the grandchild too, which a kill of the server alone would leave
// running.
func TestStopEndsTheTree(t *testing.T) {
	_, grandchild, p, err := startTree()
	if err != nil {
		t.Fatal(err)
	}
	hg := openProcess(t, grandchild)
	p.stop(50*time.Millisecond, 50*time.Millisecond)
	if !waitEnded(hg, 10*time.Second) {
		t.Fatalf("grandchild %d still runs 10 s after its server was stopped", grandchild)
	}
	if p.group.alive() {
		t.Error("alive: the stopped server's job still has a live process")
	}
	code, desc := p.exit()
	if code == nil || *code != exitKilled {
		t.Errorf("exit %v %q, want %d (killed by tether)", code, desc, exitKilled)
	}
}

// A server that exits by itself with code 137 did so: only a job tether
// terminated is described as killed by tether.
func TestDescribeExitOwnCode137(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=exit137")
	_ = cmd.Run()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitKilled {
		t.Fatalf("helper exited %v, want code %d", cmd.ProcessState, exitKilled)
	}
	if _, desc := describeExitCode(cmd.ProcessState, false); desc != "exit code 137" {
		t.Errorf("natural exit 137 described as %q, want %q", desc, "exit code 137")
	}
	if _, desc := describeExitCode(cmd.ProcessState, true); !strings.Contains(desc, "killed by tether") {
		t.Errorf("terminated job described as %q, want killed by tether", desc)
	}
}

// Stopping a server whose leader has exited neither sends Ctrl-Break to its
// (possibly reused) pid nor touches another server's job: each process
// holds its own job, and a stopped one's is closed.
func TestStopTouchesOnlyItsOwnJob(t *testing.T) {
	_, g1, p1, err := startTree()
	if err != nil {
		t.Fatal(err)
	}
	_, g2, p2, err := startTree()
	if err != nil {
		t.Fatal(err)
	}
	h1, h2 := openProcess(t, g1), openProcess(t, g2)
	p1.stop(50*time.Millisecond, 50*time.Millisecond)
	if !waitEnded(h1, 10*time.Second) {
		t.Fatalf("grandchild %d still runs after its server was stopped", g1)
	}
	if err := p1.group.kill(syscall.SIGTERM); err == nil {
		t.Error("Ctrl-Break was sent to the pid of a server that has exited")
	}
	if err := p1.group.kill(syscall.SIGKILL); err == nil {
		t.Error("TerminateJobObject on a closed job succeeded")
	}
	if waitEnded(h2, 0) || !p2.group.alive() {
		t.Fatal("stopping one server ended another's tree")
	}
	p2.stop(50*time.Millisecond, 50*time.Millisecond)
	if !waitEnded(h2, 10*time.Second) {
		t.Fatalf("grandchild %d still runs after its server was stopped", g2)
	}
}
