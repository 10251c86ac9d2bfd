//go:build linux

// Command bench measures tether end to end, as a user would run it: it builds
// the real binary and the example server from the working tree, runs
// `tether run` on temporary manifest trees against real backends (example
// server processes over streamable HTTP and stdio), and times what the
// status files show and what an MCP client sees. It prints a table and can
// write the same figures as JSON. Linux only: it reads /proc for memory,
// CPU and descriptors.
//
//	go run ./hack/bench -json _output/bench.json        # everything (make bench)
//	go run ./hack/bench -scenario gateway,recovery      # some scenarios
//	go run ./hack/bench -scenario http -pprof _output/pprof  # with profiles
//
// Scenarios (see README.md for what each measures and the targets):
//
//	http           cold start of 100 and 1,000 HTTP connections; at 1,000 also
//	               RSS, idle CPU and edit-to-status latency
//	idle1          RSS and CPU of tether idle with one connection
//	stdio          cold start of 100 stdio connections; tether's own RSS
//	recovery       killed HTTP backend and killed stdio child: time until a
//	               call through the gateway succeeds again
//	ondemand       a call to a stopped OnDemand server (which starts it) vs
//	               one to an Always server; RSS of tether and its children
//	               with idle OnDemand servers vs Always ones
//	gateway        call latency and throughput direct vs through the gateway
//	gobench        Go benchmarks (-benchmem) of the hot paths
//	stdio-latency  one stdio manifest at a time: write-to-Connected
//	stdio-burst    N stdio manifests written at once into a running tether
//	bridge         what a bridge (tether run --stdio on an owned directory)
//	               adds per call; the takeover time
//
// It never asserts: targets are printed beside the figures, and a missed one
// is reported, not failed. The machine is shared, so every scenario records
// the load average it started under.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// Result is one measured figure.
type Result struct {
	Scenario string  `json:"scenario"`
	Metric   string  `json:"metric"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Samples  int     `json:"samples,omitempty"`
	// Target is the goal for this figure ("<= 2000"); Met whether the value
	// meets it.
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
	// Load is /proc/loadavg when the scenario started.
	Load string `json:"load,omitempty"`
}

func (r Result) atMost(limit float64) Result {
	met := r.Value <= limit
	r.Target, r.Met = fmt.Sprintf("<= %g", limit), &met
	return r
}

func (r Result) atLeast(limit float64) Result {
	met := r.Value >= limit
	r.Target, r.Met = fmt.Sprintf(">= %g", limit), &met
	return r
}

// Report is the JSON file: the machine, then the figures.
type Report struct {
	Machine  Machine   `json:"machine"`
	Started  time.Time `json:"started"`
	Duration string    `json:"duration"`
	Args     []string  `json:"args"`
	Results  []Result  `json:"results"`
}

// Machine describes where the figures come from.
type Machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryMB  int64  `json:"memoryMB"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
	Commit    string `json:"commit"`
	LoadStart string `json:"loadStart"`
	LoadEnd   string `json:"loadEnd"`
	NoFile    uint64 `json:"nofile"`
	TempFS    string `json:"tempFS,omitempty"` // where the trees are: tempFS
}

// config is what every scenario may read.
type config struct {
	bins     *binaries
	pprofDir string
	runs     int
	sizes    []int
	perProc  int
	idle     time.Duration
	edits    int
	stdioN   int
	recovers int
	odRounds int
	odN      int
	loadDur  time.Duration
	rounds   int
	concs    []int
	samples  int
	burst    int
	// tetherFlags are added to every `tether run` and tetherEnv to its
	// environment (experiments: --workers, GOGC).
	tetherFlags, tetherEnv []string
	// trees are the runs' manifest trees, removed when the harness ends
	// (see tempTree).
	trees []string
}

type scenario struct {
	name string
	all  bool // part of "all"
	run  func(ctx context.Context, c *config) ([]Result, error)
}

var scenarios = []scenario{
	{"gobench", true, goBench},
	{"idle1", true, idleOne},
	{"stdio", true, stdioCold},
	{"http", true, httpCold},
	{"recovery", true, recovery},
	{"ondemand", true, onDemand},
	{"gateway", true, gatewayOverhead},
	{"bridge", true, bridgeOverhead},
	{"stdio-latency", false, stdioLatency},
	{"stdio-burst", false, stdioBurst},
	{"sandbox", true, sandboxStart},
}

func main() { os.Exit(run()) }

func run() int {
	var names []string
	for _, s := range scenarios {
		names = append(names, s.name)
	}
	c := &config{}
	scenarioFlag := flag.String("scenario", "all", "comma-separated scenarios, or all: "+strings.Join(names, ", "))
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	flag.StringVar(&c.pprofDir, "pprof", "", "build tether with net/http/pprof and save CPU and heap profiles of the scenarios in this directory")
	flag.IntVar(&c.runs, "runs", 3, "cold starts per size (http, stdio); the median is reported")
	sizes := flag.String("http-sizes", "100,1000", "HTTP connection counts for the cold start")
	flag.IntVar(&c.perProc, "per-backend", 100, "HTTP connections per example server process")
	flag.DurationVar(&c.idle, "idle", 30*time.Second, "idle window for CPU at the largest HTTP size")
	flag.IntVar(&c.edits, "edits", 50, "edits of each kind for the edit-to-status latency")
	flag.IntVar(&c.stdioN, "stdio-n", 100, "stdio connections for the stdio cold start")
	flag.IntVar(&c.recovers, "recoveries", 5, "kill/recover cycles of each kind")
	flag.IntVar(&c.odRounds, "ondemand-rounds", 7, "ondemand: calls to a stopped server (each after its idle stop)")
	flag.IntVar(&c.odN, "ondemand-n", 10, "ondemand: stdio servers for the memory figures")
	flag.DurationVar(&c.loadDur, "load", 2*time.Second, "duration of one gateway load run")
	flag.IntVar(&c.rounds, "rounds", 3, "gateway load runs per path and concurrency (median reported)")
	concs := flag.String("conc", "1,16,64", "gateway concurrencies")
	flag.StringVar(&agentProtocol, "protocol", "", "the protocol version the agents ask for (e.g. 2025-11-25); default: the go-sdk client's latest")
	flag.IntVar(&c.samples, "samples", 25, "samples for stdio-latency and sandbox")
	flag.IntVar(&c.burst, "burst", 100, "manifests for stdio-burst")
	tetherFlags := flag.String("tether-flags", "", "extra flags for every `tether run`, space-separated (e.g. \"--workers 16\")")
	tetherEnv := flag.String("tether-env", "", "extra environment for every `tether run`, space-separated (e.g. GOGC=400)")
	commit := flag.String("commit", "", "the commit measured, for the report (default: git describe of the working directory)")
	flag.Parse()
	c.tetherFlags, c.tetherEnv = strings.Fields(*tetherFlags), strings.Fields(*tetherEnv)

	var err error
	if c.sizes, err = parseInts(*sizes); err != nil {
		fmt.Fprintln(os.Stderr, "-http-sizes:", err)
		return 2
	}
	if c.concs, err = parseInts(*concs); err != nil {
		fmt.Fprintln(os.Stderr, "-conc:", err)
		return 2
	}
	want := map[string]bool{}
	for _, n := range strings.Split(*scenarioFlag, ",") {
		n = strings.TrimSpace(n)
		if n != "all" && !slices.Contains(names, n) {
			fmt.Fprintf(os.Stderr, "-scenario: unknown %q (have %s)\n", n, strings.Join(names, ", "))
			return 2
		}
		want[n] = true
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	report := Report{Started: time.Now().UTC().Truncate(time.Second), Args: os.Args[1:], Machine: machine()}
	if *commit != "" {
		report.Machine.Commit = *commit
	}
	if report.Machine.NoFile, err = raiseNoFile(); err != nil {
		fmt.Fprintln(os.Stderr, "raising the open-file limit:", err)
	}
	if c.bins, err = buildBinaries(c.pprofDir != ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.bins.remove()
	defer c.removeTrees()

	fmt.Fprintf(os.Stderr, "machine: %s, %d cores, %d MB, load %s\n",
		report.Machine.CPU, report.Machine.Cores, report.Machine.MemoryMB, report.Machine.LoadStart)
	if report.Machine.TempFS != "" {
		fmt.Fprintf(os.Stderr, "trees in %s\n", report.Machine.TempFS)
	}
	failed := false
	for _, s := range scenarios {
		if !want[s.name] && !(want["all"] && s.all) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		load := loadAvg()
		fmt.Fprintf(os.Stderr, "== %s (load %s)\n", s.name, load)
		t0 := time.Now()
		rs, err := s.run(ctx, c)
		for i := range rs {
			rs[i].Scenario, rs[i].Load = s.name, load
		}
		report.Results = append(report.Results, rs...)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", s.name, err)
			failed = true
		}
		fmt.Fprintf(os.Stderr, "   %s took %v\n", s.name, time.Since(t0).Round(100*time.Millisecond))
	}
	report.Machine.LoadEnd = loadAvg()
	report.Duration = time.Since(report.Started).Round(time.Second).String()

	printTable(report)
	if *jsonOut != "" {
		data, _ := json.MarshalIndent(report, "", "  ")
		err := os.MkdirAll(filepath.Dir(*jsonOut), 0o755)
		if err == nil {
			err = os.WriteFile(*jsonOut, append(data, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if failed {
		return 1
	}
	return 0
}

func printTable(r Report) {
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "# %s, %d cores, %d MB, Linux %s; %s; commit %s; load %s → %s; %s\n",
		r.Machine.CPU, r.Machine.Cores, r.Machine.MemoryMB, r.Machine.Kernel, r.Machine.Go, r.Machine.Commit,
		r.Machine.LoadStart, r.Machine.LoadEnd, r.Duration)
	fmt.Fprintln(tw, "SCENARIO\tMETRIC\tVALUE\tUNIT\tN\tTARGET\tMET")
	for _, x := range r.Results {
		met := ""
		if x.Met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*x.Met]
		}
		n := ""
		if x.Samples > 0 {
			n = fmt.Sprint(x.Samples)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.Scenario, x.Metric, formatValue(x.Value), x.Unit, n, x.Target, met)
	}
	tw.Flush()
}

func formatValue(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100 || v <= -100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10 || v <= -10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), LoadStart: loadAvg(), TempFS: tempFS()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(data), "MemTotal: %d kB", &kb); err == nil {
			m.MemoryMB = kb >> 10
		}
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		var b []byte
		for _, c := range u.Release {
			if c == 0 {
				break
			}
			b = append(b, byte(c))
		}
		m.Kernel = string(b)
	}
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	return m
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(f), "%d", &n); err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// millis converts a duration to milliseconds for a Result.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// micros converts a duration to microseconds for a Result.
func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// median returns the middle of xs (the mean of the two middles for an even
// count); xs is sorted in place.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// percentile of sorted xs, nearest rank below.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*p/100)]
}

// tempTree makes a fresh manifest directory for one tether run. The trees
// stay until the harness ends (removeTrees): on an ext4 without a journal,
// every file created within seconds to minutes of many removals costs a
// pass over the freed inodes (README, "The start and the file system"), so
// removing one run's tree just before the next would measure the harness's
// own removal in the next run's start.
func (c *config) tempTree(name string) (string, error) {
	parent, err := os.MkdirTemp("", "tether-bench-")
	if err != nil {
		return "", err
	}
	c.trees = append(c.trees, parent)
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// removeTrees removes every tree tempTree made.
func (c *config) removeTrees() {
	for _, t := range c.trees {
		os.RemoveAll(t)
	}
}
