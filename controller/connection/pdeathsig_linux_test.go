package connection

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a tether that starts one child and
// waits to be killed (see TestMain).
const helperEnv = "TETHER_CONNECTION_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "start-child-then-wait" {
		startChildThenWait()
		return
	}
	os.Exit(m.Run())
}

// startChildThenWait starts `sleep 300` the way Connect does, from a
// goroutine that then exits locked to its thread, which ends that thread
// (the trap of golang/go#27505 when the forking thread is not kept). It
// prints the child's pid and blocks until it is killed.
func startChildThenWait() {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	pids := make(chan int)
	var start func()
	start = func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		if syscall.Gettid() == os.Getpid() {
			// The main thread is never terminated, only wedged: hold it
			// and try again from another thread.
			go start()
			return
		}
		p, err := startProcess("sleep", sleep, []string{"300"}, "", nil, newStderrTail(nil), slog.New(slog.DiscardHandler), nil, nil)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		pids <- p.pid
	}
	go start()
	fmt.Println(<-pids)
	select {}
}

// procState returns the state letter of pid from /proc ("" if gone).
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// No stdio child outlives tether, even when tether is killed with SIGKILL;
// and the child does not die with the thread of whoever called Connect.
func TestChildDiesWithTether(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=start-child-then-wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })

	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("helper said %q", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	// The thread of the goroutine that called startProcess is gone by now
	// or soon; a child tied to it would die within milliseconds. There is
	// no event for "did not die", so watch it for a while.
	for range 20 {
		if st := procState(pid); st == "" || st == "Z" {
			t.Fatalf("child died (state %q) while its tether was alive", st)
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	deadline := time.Now().Add(2 * time.Second)
	for {
		st := procState(pid)
		if st == "" || st == "Z" {
			return // dead; init reaps the zombie
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d still running (state %s) 2s after its tether was SIGKILLed", pid, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
