//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// goBenchmarks are the hot paths' Go benchmarks: package and -bench pattern.
// The gateway's call benchmarks (BenchmarkDirectCall, BenchmarkGatewayCall)
// are not among them: the gateway scenario measures that path end to end.
var goBenchmarks = []struct{ pkg, pattern string }{
	{"./spec", "^(BenchmarkDecodeFile|BenchmarkHash)$"},         // decode+validate a manifest, spec hash
	{"./controller/statusfile", "^BenchmarkRenderStatus$"},      // status render: tether's renderer ("fast") and the generic one
	{"./hack/bench", "^BenchmarkStatusPut$"},                    // status render, compare with the file, write on a change
	{"./controller/gateway", "^(BenchmarkRoute|BenchmarkSet)$"}, // tool-name routing, publishing a connection
}

// goBench runs the hot paths' Go benchmarks with -benchmem and reports
// ns/op, B/op and allocs/op of each.
func goBench(ctx context.Context, _ *config) ([]Result, error) {
	var out []Result
	for _, b := range goBenchmarks {
		cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", b.pattern, "-benchmem", "-benchtime", "1s", b.pkg)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return out, fmt.Errorf("go test -bench %s %s: %v\n%s%s", b.pattern, b.pkg, err, stdout.String(), stderr.String())
		}
		rs := parseBenchOutput(strings.TrimPrefix(b.pkg, "./"), stdout.String())
		if len(rs) == 0 {
			return out, fmt.Errorf("go test -bench %s %s: no benchmark ran\n%s", b.pattern, b.pkg, stdout.String())
		}
		out = append(out, rs...)
	}
	return out, nil
}

// parseBenchOutput reads `go test -bench -benchmem` lines:
//
//	BenchmarkHash/Hash-2   123456   9876 ns/op   1234 B/op   12 allocs/op
//
// into one result per unit. Custom metrics (b.ReportMetric) are kept too.
func parseBenchOutput(pkg, text string) []Result {
	var out []Result
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		iters, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		// Drop the -GOMAXPROCS suffix.
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			out = append(out, Result{Metric: pkg + " " + name, Value: v, Unit: f[i+1], Samples: iters})
		}
	}
	return out
}
