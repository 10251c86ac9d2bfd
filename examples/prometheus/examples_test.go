// Package prometheus_test checks the Prometheus examples: the alerting rules
// pass their promtool unit tests, the scrape config is valid, and every query
// of the rules, the Grafana dashboard and the README parses and names only
// metrics tether exports.
package prometheus_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/tether-mcp/tether/controller/metrics"
	"github.com/tether-mcp/tether/spec"
)

// promtool returns the path of promtool, skipping the test when it is not
// installed (failing under CI=true, where it must be).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool is not installed (apt-get install prometheus): %v", err)
		}
		t.Skip("promtool is not installed (apt-get install prometheus)")
	}
	return p
}

func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPromtool(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"check rules", []string{"check", "rules", "tether-alerts.yaml"}, "SUCCESS: 5 rules found"},
		{"test rules", []string{"test", "rules", "tether-alerts_test.yaml"}, "SUCCESS"},
		{"check config", []string{"check", "config", "prometheus.yml"}, "is valid prometheus config file syntax"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out := runPromtool(t, tc.args...); !strings.Contains(out, tc.want) {
				t.Errorf("promtool %s: output lacks %q:\n%s", strings.Join(tc.args, " "), tc.want, out)
			}
		})
	}
}

// ruleFile is the part of a Prometheus rule file these tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert  string `json:"alert,omitempty"`
			Record string `json:"record,omitempty"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// dashboard is the part of the Grafana dashboard these tests read.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// dashboardExprs returns every panel query of the dashboard, by panel title,
// with Grafana's variables replaced by values Prometheus accepts.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	vars := strings.NewReplacer("$__rate_interval", "1m", "$job", "tether", "$instance", "127.0.0.1:9464", "$connection", ".+")
	out := map[string]string{}
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			out[fmt.Sprintf("%s[%d]", p.Title, i)] = vars.Replace(tg.Expr)
		}
	}
	// label_values(metric{…}, label) names a metric too.
	lv := regexp.MustCompile(`^label_values\((.*), *[a-z_]+\)$`)
	for _, v := range d.Templating.List {
		if m := lv.FindStringSubmatch(v.Definition); m != nil {
			out["variable "+v.Name] = vars.Replace(m[1])
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d queries in the dashboard", len(out))
	}
	return out
}

// readmeQueries returns the queries of README.md's promql blocks, one per
// line that is not a comment.
func readmeQueries(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	in := false
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "```promql"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in && strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#"):
			out[fmt.Sprintf("README.md:%d", i+1)] = line
		}
	}
	if len(out) == 0 {
		t.Fatal("README.md has no promql queries")
	}
	return out
}

// TestQueriesParse has promtool parse every query of the dashboard and the
// README, as the expressions of recording rules.
func TestQueriesParse(t *testing.T) {
	bin := promtool(t)
	exprs := dashboardExprs(t)
	maps.Copy(exprs, readmeQueries(t))
	var rules []map[string]string
	for _, k := range sortedKeys(exprs) {
		rules = append(rules, map[string]string{"record": "dashboard:query", "expr": exprs[k]})
	}
	data, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("a query does not parse: %v\n%s", err, out)
	}
}

// TestQueriesNameExportedMetrics checks that the rules, the dashboard and
// the README use only metrics that tether's registry exports (or
// Prometheus' own up), so a renamed metric cannot silently blank a panel or
// disarm an alert.
func TestQueriesNameExportedMetrics(t *testing.T) {
	m := metrics.New("test")
	m.ConnectionAdded("c")
	m.SetManifestErrors("f.yaml", 1)
	p := m.QueueProvider()
	p.NewDepthMetric("q")
	p.NewAddsMetric("q")
	p.NewLatencyMetric("q")
	p.NewWorkDurationMetric("q")
	p.NewUnfinishedWorkSecondsMetric("q")
	p.NewLongestRunningProcessorSecondsMetric("q")
	p.NewRetriesMetric("q")
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{"up": true}
	for _, mf := range mfs {
		exported[mf.GetName()] = true
	}

	queries := dashboardExprs(t)
	maps.Copy(queries, readmeQueries(t))
	data, err := os.ReadFile("tether-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(data, &rf); err != nil {
		t.Fatalf("tether-alerts.yaml: %v", err)
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			queries["alert "+r.Alert] = r.Expr
		}
	}

	name := regexp.MustCompile(`\b(?:tether|workqueue|go|process)_[a-z_]+\b|\bup\b`)
	for _, k := range sortedKeys(queries) {
		names := name.FindAllString(queries[k], -1)
		if len(names) == 0 {
			t.Errorf("%s: names no metric: %s", k, queries[k])
		}
		for _, n := range names {
			base := n
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suf); ok && exported[b] {
					base = b
				}
			}
			if !exported[base] {
				t.Errorf("%s: %s is not a metric tether exports", k, n)
			}
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestPhaseTimelineNamesEveryPhase: the dashboard's phase timeline maps
// every phase tether exports (tether_connection_state's state label) to a
// value and that value to the phase's name, so no phase shows as a gap.
func TestPhaseTimelineNamesEveryPhase(t *testing.T) {
	data, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Description string
			Targets     []struct{ Expr string }
			FieldConfig struct {
				Defaults struct {
					Mappings []struct {
						Options map[string]struct{ Text string }
					}
				}
			}
		}
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Panels {
		if !strings.Contains(p.Description, "phase over time") {
			continue
		}
		if len(p.Targets) != 1 || len(p.FieldConfig.Defaults.Mappings) != 1 {
			t.Fatalf("the phase timeline: %d targets, %d mappings; want one of each", len(p.Targets), len(p.FieldConfig.Defaults.Mappings))
		}
		texts := p.FieldConfig.Defaults.Mappings[0].Options
		for _, phase := range spec.Phases {
			m := regexp.MustCompile(`state=\\?"` + strings.ToLower(string(phase)) + `\\?"\} == 1\) \* (\d+)`).FindStringSubmatch(p.Targets[0].Expr)
			if m == nil {
				t.Errorf("the phase timeline's query has no value for phase %s", phase)
				continue
			}
			if got := texts[m[1]].Text; got != string(phase) {
				t.Errorf("the phase timeline maps %s (phase %s) to %q", m[1], phase, got)
			}
		}
		return
	}
	t.Fatal("no panel of the dashboard says it shows the phase over time")
}
