//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// pprofOverlay is compiled into cmd/tether, through `go build -overlay`,
// only when the harness runs with -pprof: it serves net/http/pprof on
// $TETHER_BENCH_PPROF so that the real binary can be profiled under the
// real load without a flag in the product. The committed tree never holds
// this file.
const pprofOverlay = `package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	if addr := os.Getenv("TETHER_BENCH_PPROF"); addr != "" {
		go http.ListenAndServe(addr, nil)
	}
}
`

// binaries are the programs a run uses, built once into a temporary
// directory from the working tree.
type binaries struct {
	dir     string
	tether  string
	example string
	// pprof is true when tether serves net/http/pprof (see pprofOverlay).
	pprof bool
}

func buildBinaries(withPprof bool) (_ *binaries, err error) {
	dir, err := os.MkdirTemp("", "tether-bench-bin-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	b := &binaries{
		dir:     dir,
		tether:  filepath.Join(dir, "tether"),
		example: filepath.Join(dir, "tether-example-server"),
		pprof:   withPprof,
	}
	tetherArgs := []string{"build", "-o", b.tether}
	if withPprof {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		src := filepath.Join(dir, "zz_bench_pprof.go")
		if err := os.WriteFile(src, []byte(pprofOverlay), 0o644); err != nil {
			return nil, err
		}
		ov, _ := json.Marshal(map[string]map[string]string{
			"Replace": {filepath.Join(wd, "cmd/tether/zz_bench_pprof.go"): src},
		})
		ovFile := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(ovFile, ov, 0o644); err != nil {
			return nil, err
		}
		tetherArgs = append(tetherArgs, "-overlay", ovFile)
	}
	for i, args := range [][]string{
		append(tetherArgs, "./cmd/tether"),
		{"build", "-o", b.example, "./examples/server"},
	} {
		cmd := exec.Command("go", args...)
		if i == 0 {
			// As `make build` builds it: static, no cgo.
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return b, nil
}

func (b *binaries) remove() { os.RemoveAll(b.dir) }

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitTCP waits until addr accepts a TCP connection and returns when it did.
func waitTCP(ctx context.Context, addr string) (time.Time, error) {
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s not accepting connections: %w", addr, err)
		case <-time.After(time.Millisecond):
		}
	}
}

// daemon is a running `tether run`.
type daemon struct {
	cmd     *exec.Cmd
	logPath string
	gateway string // host:port of the gateway; "" when off
	metrics string // host:port of /metrics; "" when off
	pprof   string // host:port of net/http/pprof; "" when off
	exited  chan struct{}
	waitErr error
}

type tetherOptions struct {
	gateway bool // serve the gateway on a free loopback port
	metrics bool // serve /metrics on a free loopback port
	extra   []string
}

// startTether starts `tether run --dir dir`. Its log goes to a file beside
// dir rather than a pipe, so reading it costs the harness nothing while it
// measures.
func startTether(c *config, dir string, o tetherOptions) (*daemon, error) {
	b := c.bins
	d := &daemon{logPath: dir + ".tether.log", exited: make(chan struct{})}
	args := []string{"run", "--dir", dir}
	for _, a := range []struct {
		on   bool
		flag string
		addr *string
	}{{o.gateway, "--listen", &d.gateway}, {o.metrics, "--metrics-addr", &d.metrics}} {
		if a.on {
			addr, err := freeAddr()
			if err != nil {
				return nil, err
			}
			*a.addr = addr
		}
		args = append(args, a.flag, *a.addr)
	}
	args = append(append(args, o.extra...), c.tetherFlags...)
	logf, err := os.Create(d.logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	d.cmd = exec.Command(b.tether, args...)
	d.cmd.Stderr = logf
	d.cmd.Env = append(os.Environ(), c.tetherEnv...)
	if b.pprof {
		if d.pprof, err = freeAddr(); err != nil {
			return nil, err
		}
		d.cmd.Env = append(d.cmd.Env, "TETHER_BENCH_PPROF="+d.pprof)
	}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	return d, nil
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

// alive reports an error when tether has exited.
func (d *daemon) alive() error {
	select {
	case <-d.exited:
		return fmt.Errorf("tether exited: %v\n%s", d.waitErr, d.logTail(20))
	default:
		return nil
	}
}

// stop sends SIGTERM and waits (bounded) for tether to exit.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	os.Remove(d.logPath)
}

// logTail returns the last n lines of tether's log.
func (d *daemon) logTail(n int) string {
	data, _ := os.ReadFile(d.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// profile fetches a CPU profile of d over the next dur (when tether serves
// pprof) into _output/pprof/<name>-cpu.pb.gz, in the background; call the
// returned func to wait for it.
func (d *daemon) profile(outDir, name string, dur time.Duration) func() {
	if d.pprof == "" || outDir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		secs := max(int(dur.Round(time.Second)/time.Second), 1)
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", d.pprof, secs)
		if err := fetch(url, filepath.Join(outDir, name+"-cpu.pb.gz")); err != nil {
			fmt.Fprintf(os.Stderr, "pprof %s: %v\n", name, err)
		}
	}()
	return func() { <-done }
}

// heapProfile saves a heap profile of d (after a GC), and its goroutines
// grouped by stack, when tether serves pprof.
func (d *daemon) heapProfile(outDir, name string) {
	if d.pprof == "" || outDir == "" {
		return
	}
	url := fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", d.pprof)
	if err := fetch(url, filepath.Join(outDir, name+"-heap.pb.gz")); err != nil {
		fmt.Fprintf(os.Stderr, "pprof %s: %v\n", name, err)
	}
	url = fmt.Sprintf("http://%s/debug/pprof/goroutine?debug=1", d.pprof)
	if err := fetch(url, filepath.Join(outDir, name+"-goroutines.txt")); err != nil {
		fmt.Fprintf(os.Stderr, "pprof %s: %v\n", name, err)
	}
}

func fetch(url, file string) error {
	// The pprof listener may come up a moment after tether starts.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errors.Join(err, f.Close())
}

// backend is an example server serving streamable HTTP.
type backend struct {
	addr   string
	ready  time.Time // when it first accepted a connection
	cmd    *exec.Cmd
	exited chan struct{}
}

func (b *backend) url() string { return "http://" + b.addr + "/mcp" }

// startBackend starts the example server on addr (a free one when "") and
// returns once it accepts connections.
func startBackend(ctx context.Context, bins *binaries, addr string) (*backend, error) {
	var err error
	if addr == "" {
		if addr, err = freeAddr(); err != nil {
			return nil, err
		}
	}
	b := &backend{addr: addr, exited: make(chan struct{})}
	b.cmd = exec.Command(bins.example, "-http", addr, "-log-level", "warn")
	b.cmd.Stderr = os.Stderr
	if err := b.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = b.cmd.Wait()
		close(b.exited)
	}()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if b.ready, err = waitTCP(wctx, addr); err != nil {
		b.kill()
		return nil, err
	}
	return b, nil
}

// kill ends the backend at once (SIGKILL) and waits for it.
func (b *backend) kill() {
	_ = b.cmd.Process.Kill()
	<-b.exited
}

func startBackends(ctx context.Context, bins *binaries, n int) ([]*backend, error) {
	var bs []*backend
	for range n {
		b, err := startBackend(ctx, bins, "")
		if err != nil {
			killAll(bs)
			return nil, err
		}
		bs = append(bs, b)
	}
	return bs, nil
}

func killAll(bs []*backend) {
	for _, b := range bs {
		b.kill()
	}
}
