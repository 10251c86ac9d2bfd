// Command bench measures tether end to end, as a user would run it: it builds
// the real binary and the example server, runs `tether run` on a temporary
// manifest tree and times what the status files show.
//
//	go run ./hack/bench -scenario all -json _output/bench.json
//
// Scenarios:
//
//	stdio-latency  write one stdio manifest at a time; time until its status
//	               file shows Connected (N samples, median and p90)
//	stdio-burst    write N stdio manifests at once; time until all are Connected
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/tether-mcp/tether/spec"
)

// Result is one measured figure.
type Result struct {
	Scenario string  `json:"scenario"`
	Metric   string  `json:"metric"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Samples  int     `json:"samples,omitempty"`
}

func main() { os.Exit(run()) }

func run() int {
	scenario := flag.String("scenario", "all", "stdio-latency, stdio-burst or all")
	samples := flag.Int("samples", 25, "samples for stdio-latency")
	burst := flag.Int("burst", 200, "manifests for stdio-burst")
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	flag.Parse()

	bin, err := os.MkdirTemp("", "tether-bench-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(bin)
	for _, b := range []struct{ out, pkg string }{
		{"tether", "./cmd/tether"},
		{"tether-example-server", "./examples/server"},
	} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(bin, b.out), b.pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", b.pkg, err, out)
			return 1
		}
	}

	var results []Result
	run := func(name string, f func(bin string) ([]Result, error)) bool {
		if *scenario != "all" && *scenario != name {
			return true
		}
		r, err := f(bin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			return false
		}
		results = append(results, r...)
		return true
	}
	ok := run("stdio-latency", func(bin string) ([]Result, error) { return stdioLatency(bin, *samples) }) &&
		run("stdio-burst", func(bin string) ([]Result, error) { return stdioBurst(bin, *burst) })

	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tMETRIC\tVALUE\tUNIT\tSAMPLES")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%d\n", r.Scenario, r.Metric, r.Value, r.Unit, r.Samples)
	}
	tw.Flush()
	if *jsonOut != "" {
		data, _ := json.MarshalIndent(results, "", "  ")
		if err := os.MkdirAll(filepath.Dir(*jsonOut), 0o755); err == nil {
			err = os.WriteFile(*jsonOut, append(data, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if !ok {
		return 1
	}
	return 0
}

// daemon is a running tether.
type daemon struct {
	cmd  *exec.Cmd
	logs bytes.Buffer
}

func startTether(bin, dir string, extra ...string) (*daemon, error) {
	args := append([]string{"run", "--dir", dir, "--listen", "", "--metrics-addr", ""}, extra...)
	d := &daemon{cmd: exec.Command(filepath.Join(bin, "tether"), args...)}
	d.cmd.Stderr = &d.logs
	return d, d.cmd.Start()
}

func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.cmd.Wait()
}

func manifest(name, command string) string {
	return fmt.Sprintf("apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: %s\nspec:\n  stdio:\n    command: %s\n", name, command)
}

// phaseOf reads the phase in the status file of manifest (first document).
func phaseOf(manifest string) spec.Phase {
	data, err := os.ReadFile(strings.TrimSuffix(manifest, ".yaml") + ".status.yaml")
	if err != nil {
		return ""
	}
	var doc spec.StatusDocument
	if yaml.Unmarshal(data, &doc) != nil {
		return ""
	}
	return doc.Status.Phase
}

// waitConnected polls until every manifest's status shows Connected. Polling
// every millisecond costs the machine a little but keeps the error of the
// measure below the figures measured.
func waitConnected(manifests []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pending := append([]string(nil), manifests...)
	for len(pending) > 0 {
		rest := pending[:0]
		for _, m := range pending {
			if phaseOf(m) != spec.PhaseConnected {
				rest = append(rest, m)
			}
		}
		pending = rest
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			phases := map[spec.Phase]int{}
			for _, m := range pending {
				phases[phaseOf(m)]++
			}
			return fmt.Errorf("%d of %d not Connected after %v: phases %v; first: %s", len(pending), len(manifests), timeout, phases, pending[0])
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func stdioLatency(bin string, n int) ([]Result, error) {
	dir, err := os.MkdirTemp("", "tether-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	d, err := startTether(bin, dir)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	server := filepath.Join(bin, "tether-example-server")
	var ms []float64
	for i := range n {
		m := filepath.Join(dir, fmt.Sprintf("lat-%03d.yaml", i))
		start := time.Now()
		if err := os.WriteFile(m, []byte(manifest(fmt.Sprintf("lat-%03d", i), server)), 0o644); err != nil {
			return nil, err
		}
		if err := waitConnected([]string{m}, 30*time.Second); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, d.logs.String())
		}
		ms = append(ms, float64(time.Since(start).Microseconds())/1000)
	}
	sort.Float64s(ms)
	return []Result{
		{"stdio-latency", "write-to-Connected p50", percentile(ms, 50), "ms", n},
		{"stdio-latency", "write-to-Connected p90", percentile(ms, 90), "ms", n},
		{"stdio-latency", "write-to-Connected max", ms[len(ms)-1], "ms", n},
	}, nil
}

func stdioBurst(bin string, n int) ([]Result, error) {
	dir, err := os.MkdirTemp("", "tether-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	d, err := startTether(bin, dir)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	server := filepath.Join(bin, "tether-example-server")
	var manifests []string
	start := time.Now()
	for i := range n {
		m := filepath.Join(dir, fmt.Sprintf("burst-%03d.yaml", i))
		if err := os.WriteFile(m, []byte(manifest(fmt.Sprintf("burst-%03d", i), server)), 0o644); err != nil {
			return nil, err
		}
		manifests = append(manifests, m)
	}
	if err := waitConnected(manifests, 120*time.Second); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, d.logs.String())
	}
	return []Result{{"stdio-burst", fmt.Sprintf("%d manifests written-to-all-Connected", n), float64(time.Since(start).Microseconds()) / 1000, "ms", 1}}, nil
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}
