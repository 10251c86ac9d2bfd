package kubetest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a process has to exit after SIGTERM before it is
// killed. kube-apiserver's graceful shutdown drains in-flight requests
// (watches included) and exits within a second or two here.
const stopGrace = 15 * time.Second

// process is one control-plane binary run by the test: its output goes to a
// log file that survives restarts (each start appends), and its exit is
// observed by a goroutine that owns the *exec.Cmd.
type process struct {
	name    string // "etcd" or "kube-apiserver", for messages
	path    string
	args    []string
	logPath string

	cmd     *exec.Cmd
	logFrom int64         // size of the log when this run started
	exited  chan struct{} // closed when the process has been reaped
	waitErr error         // set before exited is closed
}

// start runs the binary with its output appended to the log file.
func (p *process) start() error {
	logf, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("%s: open log: %w", p.name, err)
	}
	defer logf.Close() // the child has its own descriptor
	if st, err := logf.Stat(); err == nil {
		p.logFrom = st.Size()
	}
	fmt.Fprintf(logf, "==== kubetest: starting %s at %s\n", p.name, time.Now().Format(time.RFC3339Nano))

	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = childEnv()
	cmd.SysProcAttr = childSysProcAttr()
	p.cmd = cmd
	p.exited = make(chan struct{})
	p.waitErr = nil

	started := make(chan error, 1)
	go p.run(started)
	if err := <-started; err != nil {
		return fmt.Errorf("%s: start %s: %w", p.name, p.path, err)
	}
	return nil
}

// run starts and reaps the process on one locked OS thread: Pdeathsig fires
// when the thread that forked the child exits, so that thread must outlive
// the child (golang/go#27505). It is what kills the control plane when the
// test binary dies without running its cleanups (a -timeout panic).
func (p *process) run(started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := p.cmd.Start(); err != nil {
		started <- err
		close(p.exited)
		return
	}
	started <- nil
	p.waitErr = p.cmd.Wait()
	close(p.exited)
}

// running reports whether the process was started and has not exited.
func (p *process) running() bool {
	if p == nil || p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, waits up to stopGrace, then kills; it returns once the
// process is reaped. Stopping a process that is not running does nothing.
func (p *process) stop() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(stopGrace):
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// exitError describes how the process ended, for a start that failed.
func (p *process) exitError() error {
	if p.waitErr != nil {
		return fmt.Errorf("%s exited: %w", p.name, p.waitErr)
	}
	return fmt.Errorf("%s exited with status 0", p.name)
}

// logSinceStart is what the current run wrote to the log.
func (p *process) logSinceStart() string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(p.logFrom, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// addrInUse reports whether the current run failed to bind its port: the
// free port picked for it was taken meanwhile, and a retry with new ports
// will do.
func (p *process) addrInUse() bool {
	return strings.Contains(p.logSinceStart(), "address already in use")
}

// tail returns the last n lines of the log (of every run).
func (p *process) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "(no log)"
		}
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	b = bytes.TrimRight(b, "\n")
	i := len(b)
	for range n {
		j := bytes.LastIndexByte(b[:i], '\n')
		if j < 0 {
			i = 0
			break
		}
		i = j
	}
	return strings.TrimPrefix(string(b[i:]), "\n")
}

// childEnv is the test's environment without the variables that would
// reconfigure a control-plane process behind the test's back: etcd reads any
// ETCD_* variable as a flag, kubectl reads KUBECONFIG.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "ETCD_") || name == "KUBECONFIG" {
			continue
		}
		env = append(env, kv)
	}
	return env
}
