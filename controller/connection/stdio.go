package connection

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// baseEnvNames are the variables of tether's own environment a child gets
// (when set); the manifest's env comes on top. Everything else stays out, so
// that tether's own secrets never reach a server by accident.
var baseEnvNames = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"}

// Stop timing of a stdio child. StopTimeout bounds a whole graceful stop.
const (
	stdinGrace  = 2 * time.Second // after closing stdin, before SIGTERM
	termGrace   = 2 * time.Second // after SIGTERM, before SIGKILL
	killGrace   = 1 * time.Second // after SIGKILL, before giving up
	StopTimeout = stdinGrace + termGrace + killGrace
	// failedConnectGrace replaces both graces when Connect failed: the
	// server already misbehaved and the caller is waiting.
	failedConnectGrace = 200 * time.Millisecond
)

// childEnv builds the child's environment: the base variables from
// getenv, then the manifest's entries, later names overriding earlier ones.
func childEnv(getenv func(string) string, manifest []namedValue) []string {
	index := map[string]int{}
	var env []string
	set := func(name, value string) {
		kv := name + "=" + value
		if i, ok := index[name]; ok {
			env[i] = kv
			return
		}
		index[name] = len(env)
		env = append(env, kv)
	}
	for _, name := range append(baseEnvNames, platformEnvNames...) {
		if v := getenv(name); v != "" {
			set(name, v)
		}
	}
	for _, nv := range manifest {
		set(nv.Name, nv.Value)
	}
	return env
}

// envValue returns the value of name in env ("NAME=value" entries).
func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// resolveCommand implements docs/contract.md §1: a command without a slash is looked
// up in path (the PATH the child gets); a relative one with a slash is
// resolved against manifestDir. The result must be an executable file.
func resolveCommand(command, path, manifestDir string) (string, error) {
	if command == "" {
		return "", errors.New("stdio.command is empty")
	}
	if !strings.ContainsAny(command, pathSeparators) {
		for _, dir := range filepath.SplitList(path) {
			// A relative PATH entry would resolve against tether's working
			// directory, which has nothing to do with the manifest: skip it
			// (as os/exec refuses ErrDot).
			if !filepath.IsAbs(dir) {
				continue
			}
			if candidate, ok := findExecutable(filepath.Join(dir, command)); ok {
				return candidate, nil
			}
		}
		return "", fmt.Errorf("command %q not found in PATH", command)
	}
	resolved := command
	if !filepath.IsAbs(command) {
		if manifestDir == "" {
			return "", fmt.Errorf("command %q is relative but the manifest's directory is unknown", command)
		}
		resolved = filepath.Join(manifestDir, command)
	}
	if err := isExecutable(resolved); err != nil {
		return "", fmt.Errorf("command %q: %w", command, err)
	}
	return resolved, nil
}

// process is one running stdio child and the pipes to it. The session's
// transport reads stdout and writes stdin; process owns the rest.
type process struct {
	cmd *exec.Cmd
	pid int
	// group is the child's tree (its process group, or its Job Object on
	// Windows), set before startProcess returns.
	group *procGroup
	tail  *stderrTail
	log   *slog.Logger
	// ledger recorded the child's process group (the Connector's); nil
	// when none does.
	ledger *GroupLedger
	// For a container server: the container's name and the runtime whose
	// command the child is, and what removes the container once the
	// child is stopped (container.go).
	container, runtime string
	afterStop          func()
	// noStdin: nothing reads the child's stdin (the runtime's command of
	// a port server), so a stop does not wait for it to act on its close.
	noStdin bool

	stdin   *os.File // write end; closing it asks the server to exit
	stdout  *os.File // read end
	stderrR *os.File // read end, drained into tail

	exited  chan struct{} // closed once the child has been reaped
	drained chan struct{} // closed once the stderr drain ended

	mu       sync.Mutex
	exitCode *int
	exitDesc string // "exit code 1", "killed by SIGKILL (exit code 137)"

	stopOnce sync.Once

	// conf is the child's sandbox (nil: none); its temporary directory is
	// removed once the child's group is gone.
	conf *confinement
}

// startProcess starts path with args in dir and env, in its own process
// group. The child's stdin/stdout are pipes the caller gets as p.stdin and
// p.stdout; stderr goes to tail.
// conf, when not nil, starts tether's launcher instead, which confines
// itself and then execs path (sandbox.go).
func startProcess(argv0, path string, args []string, dir string, env []string, tail *stderrTail, log *slog.Logger, ledger *GroupLedger, conf *confinement) (p *process, err error) {
	var files []*os.File // every pipe end, closed on failure
	defer func() {
		if err != nil {
			for _, f := range files {
				_ = f.Close()
			}
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	stdinR, stdinW, err := pipe()
	if err != nil {
		return nil, err
	}
	stdoutR, stdoutW, err := pipe()
	if err != nil {
		return nil, err
	}
	stderrR, stderrW, err := pipe()
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: path,
		Args: append([]string{argv0}, args...),
		Dir:  dir,
		Env:  env,
		// *os.File ends are handed to the child as they are: no copying
		// goroutines, so Wait returns when the child exits even if a
		// grandchild still holds a pipe.
		Stdin:       stdinR,
		Stdout:      stdoutW,
		Stderr:      stderrW,
		SysProcAttr: childSysProcAttr(),
	}
	if conf != nil {
		cmd.Path = conf.launcher
		cmd.Args = append([]string{argv0}, conf.args...)
		cmd.Env = append(slices.Clip(env), conf.planEnv)
		conf.namespaces(cmd.SysProcAttr)
	}
	p = &process{
		cmd:     cmd,
		conf:    conf,
		tail:    tail,
		log:     log,
		stdin:   stdinW,
		stdout:  stdoutR,
		stderrR: stderrR,
		exited:  make(chan struct{}),
		drained: make(chan struct{}),
	}
	started := make(chan error, 1)
	go p.run(started)
	if err := <-started; err != nil {
		return nil, err
	}
	p.pid = cmd.Process.Pid
	if ledger != nil {
		p.ledger = ledger
		ledger.record(p.pid)
	}
	// The child has its copies; ours would keep the pipes open after it exits.
	_ = stdinR.Close()
	_ = stdoutW.Close()
	_ = stderrW.Close()
	go p.drain()
	return p, nil
}

// run starts the child and reaps it, locked to one OS thread the whole time:
// Pdeathsig fires when the thread that forked the child exits, so that
// thread must outlive the child (golang/go#27505).
func (p *process) run(started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	starting.RLock() // until the child is known as tether's own (ReapOrphans)
	if err := p.cmd.Start(); err != nil {
		starting.RUnlock()
		started <- err
		return
	}
	group, err := adoptChild(p.cmd.Process, p.exited)
	if err != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		starting.RUnlock()
		started <- err
		return
	}
	p.group = group
	registerOwn(p.cmd.Process.Pid)
	starting.RUnlock()
	started <- nil
	_ = p.cmd.Wait() // the exit status is in ProcessState
	forgetOwn(p.cmd.Process.Pid)
	code, desc := p.group.describeExit(p.cmd.ProcessState)
	p.mu.Lock()
	p.exitCode = &code
	p.exitDesc = desc
	p.mu.Unlock()
	close(p.exited)
}

// drain copies stderr into the tail until every holder of the write end has
// gone (or stop closed the read end).
func (p *process) drain() {
	defer close(p.drained)
	buf := make([]byte, 32*1024)
	_, _ = io.CopyBuffer(p.tail, p.stderrR, buf)
}

// awaitStderr waits up to d for the stderr drain to reach EOF.
func (p *process) awaitStderr(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.drained:
	case <-t.C:
	}
}

// exit returns the exit code and its description, or nil while running.
func (p *process) exit() (*int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exitCode == nil {
		return nil, ""
	}
	c := *p.exitCode
	return &c, p.exitDesc
}

// status describes the child for spec.ConnectionStatus. Restarts is the
// reconciler's to count.
func (p *process) status() *spec.ProcessStatus {
	code, _ := p.exit()
	return &spec.ProcessStatus{PID: p.pid, Container: p.container, Runtime: p.runtime, LastExitCode: code, StderrTail: p.tail.Lines()}
}

// stop ends the child and everything left in its process group: close
// stdin, wait up to stdinWait; SIGTERM the group, wait up to termWait;
// SIGKILL the group, wait up to killGrace. It returns when the group is gone
// or the bound is spent (an unkillable child is left to run, which keeps
// reaping it), and is safe to call more than once and concurrently.
func (p *process) stop(stdinWait, termWait time.Duration) {
	// Once.Do makes a concurrent caller wait for the first one to finish.
	p.stopOnce.Do(func() { p.doStop(stdinWait, termWait) })
}

func (p *process) doStop(stdinWait, termWait time.Duration) {
	// Absolute deadlines, so that a slow phase (a loaded machine) cannot push
	// the whole stop past its bound.
	start := time.Now()
	if p.noStdin {
		stdinWait = 0
	}
	termAt := start.Add(stdinWait)
	killAt := termAt.Add(termWait)
	deadline := killAt.Add(killGrace)
	_ = p.stdin.Close()
	gone := p.waitGone(termAt)
	if !gone {
		p.log.Debug("process group still running after stdin closed: SIGTERM", "pid", p.pid, "after", time.Since(start))
		_ = p.group.kill(syscall.SIGTERM)
		if gone = p.waitGone(killAt); !gone {
			p.log.Debug("process group still running after SIGTERM: SIGKILL", "pid", p.pid, "after", time.Since(start))
			_ = p.group.kill(syscall.SIGKILL)
			if gone = p.waitGone(deadline); !gone {
				p.log.Warn("process group still running after SIGKILL", "pid", p.pid, "after", time.Since(start))
			}
		}
	}
	if p.ledger != nil && gone {
		p.ledger.forget(p.pid) // one left running stays recorded for the next start
	}
	if gone {
		p.conf.cleanup()
	}
	// With the whole group gone, stderr reaches EOF at once; a process that
	// left the group (setsid) may still hold it, so do not wait for that.
	drainBy := time.NewTimer(min(100*time.Millisecond, max(0, time.Until(deadline))))
	defer drainBy.Stop()
	select {
	case <-p.drained:
	case <-drainBy.C:
	}
	_ = p.stderrR.Close()
	_ = p.stdout.Close()
	<-p.drained // a closed read end ends the copy at once
	if p.afterStop != nil {
		p.afterStop()
	}
	p.log.Debug("process stopped", "pid", p.pid, "took", time.Since(start))
}

// waitGone waits until deadline for the child to be reaped and its process
// group to be empty.
func (p *process) waitGone(deadline time.Time) bool {
	timer := time.NewTimer(max(0, time.Until(deadline)))
	defer timer.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.exited:
			// The leader is reaped: what is left of the group that is
			// tether's child (an orphan re-parented to the subreaper) can
			// be reaped without taking the leader's status from Wait.
			reapGroup(p.pid)
			if !p.group.alive() {
				return true
			}
		default:
		}
		select {
		case <-timer.C:
			return false
		case <-tick.C:
		}
	}
}
