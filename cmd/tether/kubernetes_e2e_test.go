//go:build unix

package main

// End-to-end tests of Kubernetes mode: the tether binary against a real
// kube-apiserver and etcd, objects written with a real kubectl, real MCP
// servers behind them.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/tether-mcp/tether/controller/kubernetes"
	"github.com/tether-mcp/tether/controller/kubernetes/kubetest"
	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// TestKubernetesMode walks one tether through the life of its objects:
// create, kubectl wait, edit, invalid objects, a Secret rotated, delete, and
// an API server that restarts under it.
func TestKubernetesMode(t *testing.T) {
	c := startCluster(t)
	bin := builtBinaries(t)
	server := filepath.Join(bin, "tether-example-server")
	ns := c.namespace(t, "e2e")
	tt := startKubeTether(t, c, "--namespace", ns)
	tt.waitLog(t, 60*time.Second, "McpConnections listed")

	t.Run("create connects and kubectl wait sees Ready", func(t *testing.T) {
		began := time.Now()
		c.apply(t, ns, stdioManifest("echo", server, nil, ""))
		st := c.waitObject(t, ns, "echo", 30*time.Second, "Connected", connectedAt)
		t.Logf("created → Connected in status: %s", time.Since(began).Round(time.Millisecond))
		if st.Tools == nil || st.Tools.Count != 5 || st.Process == nil || st.Process.PID == 0 {
			t.Errorf("status = %+v, want 5 tools and a pid", st)
		}
		if c := conditionOf(st, spec.ConditionReady); c.Status != spec.ConditionTrue || c.Reason != spec.ReasonConnected {
			t.Errorf("Ready = %+v", c)
		}
		c.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=30s", "mcpconnection/echo")
		out := c.Kubectl(t, "get", "mcpconnections", "-n", ns, "echo")
		header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
		if strings.Join(header, " ") != "NAME PHASE TOOLS READY AGE" {
			t.Errorf("kubectl get columns = %v\n%s", header, out)
		}
		if !strings.Contains(out, "Connected") {
			t.Errorf("kubectl get:\n%s", out)
		}
		waitEvent(t, c, ns, "echo", "Connected")

		// The same through the API alone, without kubectl's own start-up
		// in the figure.
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(stdioManifest("direct", server, nil, "")), &obj.Object); err != nil {
			t.Fatal(err)
		}
		began = time.Now()
		if _, err := c.dyn.Resource(kubernetes.Resource).Namespace(ns).Create(t.Context(), &obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.waitObject(t, ns, "direct", 30*time.Second, "Connected", connectedAt)
		t.Logf("created through the API → Connected in status: %s", time.Since(began).Round(time.Millisecond))
		c.Kubectl(t, "delete", "-n", ns, "mcpconnection", "direct")
	})

	t.Run("a spec edit reconnects, a prefix edit applies in place", func(t *testing.T) {
		before := c.waitObject(t, ns, "echo", 10*time.Second, "Connected", connectedAt)
		began := time.Now()
		c.apply(t, ns, stdioManifest("echo", server, []string{"-log-level", "debug"}, ""))
		after := c.waitObject(t, ns, "echo", 30*time.Second, "Connected to a new child", func(st spec.ConnectionStatus, gen int64) bool {
			return connectedAt(st, gen) && st.Process.PID != before.Process.PID
		})
		t.Logf("spec edit → Connected again: %s", time.Since(began).Round(time.Millisecond))
		if !processGone(before.Process.PID, 10*time.Second) {
			t.Errorf("the child of the old spec (pid %d) is still running", before.Process.PID)
		}
		c.apply(t, ns, stdioManifest("echo", server, []string{"-log-level", "debug"}, "  toolPrefix: renamed\n"))
		inPlace := c.waitObject(t, ns, "echo", 30*time.Second, "the new generation observed", func(st spec.ConnectionStatus, gen int64) bool {
			return connectedAt(st, gen) && st.ObservedSpecHash != after.ObservedSpecHash
		})
		if inPlace.Process.PID != after.Process.PID {
			t.Errorf("a toolPrefix edit reconnected: pid %d → %d", after.Process.PID, inPlace.Process.PID)
		}
	})

	t.Run("an object tether rejects is Invalid; a bad edit keeps the last valid spec", func(t *testing.T) {
		// The API server accepts a name with a dot; a connection name is
		// a DNS-1123 label.
		c.apply(t, ns, stdioManifest("bad.name", server, nil, ""))
		st := c.waitObject(t, ns, "bad.name", 30*time.Second, "Invalid", func(st spec.ConnectionStatus, gen int64) bool {
			return st.Phase == spec.PhaseInvalid && st.ObservedGeneration == gen
		})
		if c := conditionOf(st, spec.ConditionStalled); c.Status != spec.ConditionTrue ||
			!strings.Contains(st.ManifestError, `McpConnection e2e/bad.name: metadata.name: invalid name: must be a DNS-1123 label`) {
			t.Errorf("Stalled = %+v, manifestError %q", c, st.ManifestError)
		}
		waitEvent(t, c, ns, "bad.name", spec.ReasonManifestInvalid)

		// backoff.max below backoff.initial: the CRD's schema cannot say
		// it, tether's validation does.
		good := c.waitObject(t, ns, "echo", 10*time.Second, "Connected", connectedAt)
		c.apply(t, ns, stdioManifest("echo", server, []string{"-log-level", "debug"}, "  toolPrefix: renamed\n  backoff: {initial: 5s, max: 1s}\n"))
		st = c.waitObject(t, ns, "echo", 30*time.Second, "the bad generation observed", func(st spec.ConnectionStatus, gen int64) bool {
			return st.ObservedGeneration == gen && st.ManifestError != ""
		})
		if st.Phase != spec.PhaseConnected || st.Process.PID != good.Process.PID || conditionOf(st, spec.ConditionStalled).Status != spec.ConditionTrue ||
			!strings.Contains(st.ManifestError, "spec.backoff.max: 1s is less than backoff.initial (5s)") {
			t.Errorf("after a bad edit: phase %s, pid %d (was %d), Stalled %+v, manifestError %q",
				st.Phase, st.Process.PID, good.Process.PID, conditionOf(st, spec.ConditionStalled), st.ManifestError)
		}
		c.apply(t, ns, stdioManifest("echo", server, []string{"-log-level", "debug"}, "  toolPrefix: renamed\n"))
		c.waitObject(t, ns, "echo", 30*time.Second, "valid again", func(st spec.ConnectionStatus, gen int64) bool {
			return connectedAt(st, gen) && st.ManifestError == "" && conditionOf(st, spec.ConditionStalled).Status == spec.ConditionFalse
		})
	})

	t.Run("a rotated Secret reconnects; no value shows anywhere", func(t *testing.T) {
		const first, second = "first-s3cr3t-value", "second-s3cr3t-value"
		secret := func(value string) string {
			return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: token\nstringData:\n  token: " + value + "\n"
		}
		// The child prints what it got; tether redacts it in stderrTail.
		withSecret := stdioManifest("secret", "/bin/sh", []string{"-c", `echo "token=$TOKEN" >&2; exec "$0"`, server}, `    env:
      - name: TOKEN
        valueFrom: {secretKeyRef: {name: token, key: token}}
`)
		// Referenced before it exists: the attempt fails and says so.
		c.apply(t, ns, withSecret)
		c.waitObject(t, ns, "secret", 30*time.Second, "the missing Secret reported", func(st spec.ConnectionStatus, _ int64) bool {
			return st.Phase == spec.PhaseReconnecting && strings.Contains(st.LastError, "the Secret e2e/token does not exist")
		})
		began := time.Now()
		c.apply(t, ns, secret(first))
		st := c.waitObject(t, ns, "secret", 30*time.Second, "Connected", connectedAt)
		t.Logf("Secret created → Connected: %s", time.Since(began).Round(time.Millisecond))
		if !tailHas(st, "token=[redacted]") {
			t.Errorf("the child did not get the Secret's value: stderrTail %q", st.Process.StderrTail)
		}
		began = time.Now()
		c.apply(t, ns, secret(second))
		rotated := c.waitObject(t, ns, "secret", 30*time.Second, "Connected to a new child", func(s spec.ConnectionStatus, gen int64) bool {
			return connectedAt(s, gen) && s.Process.PID != st.Process.PID
		})
		t.Logf("Secret rotated → Connected again: %s", time.Since(began).Round(time.Millisecond))
		if !tailHas(rotated, "token=[redacted]") {
			t.Errorf("after the rotation: stderrTail %q", rotated.Process.StderrTail)
		}
		tt.waitLog(t, 10*time.Second, "referenced Secret changed; reconnecting")
		for what, text := range map[string]string{
			"status": c.Kubectl(t, "get", "mcpconnection", "-n", ns, "secret", "-o", "json"),
			"events": c.Kubectl(t, "get", "events", "-n", ns, "-o", "json"),
			"logs":   tt.logs.String(),
		} {
			for _, v := range []string{first, second} {
				if strings.Contains(text, v) {
					t.Errorf("the Secret's value %q shows in the %s", v, what)
				}
			}
		}
	})

	t.Run("delete disconnects", func(t *testing.T) {
		st := c.waitObject(t, ns, "echo", 10*time.Second, "Connected", connectedAt)
		c.Kubectl(t, "delete", "-n", ns, "mcpconnection", "echo")
		if !processGone(st.Process.PID, 15*time.Second) {
			t.Errorf("the child (pid %d) of the deleted object is still running", st.Process.PID)
		}
		tt.waitLog(t, 10*time.Second, `connection removed" connection=echo`)
	})

	t.Run("the informer survives an API server restart; readyz waits for it", func(t *testing.T) {
		c.StopAPIServer(t)
		// A second tether started while the API server is away is alive
		// but not ready: it has not listed anything.
		port := testport.Free(t)
		// Its namespace does not exist: it lists empty once it can list.
		other := startKubeTether(t, c, "--namespace", "e2e-other", "--metrics-addr", "127.0.0.1:"+strconv.Itoa(port))
		base := "http://127.0.0.1:" + strconv.Itoa(port)
		waitFor(t, 30*time.Second, "/healthz 200", func() (bool, string) {
			code, body, err := get(base + "/healthz")
			return code == 200, fmt.Sprint(code, body, err)
		})
		if code, _, _ := get(base + "/readyz"); code == 200 {
			t.Errorf("/readyz is 200 before the informer could list anything")
		}
		began := time.Now()
		c.StartAPIServer(t)
		waitFor(t, 60*time.Second, "/readyz 200", func() (bool, string) {
			code, body, err := get(base + "/readyz")
			return code == 200, fmt.Sprint(code, body, err)
		})
		t.Logf("API server back → second tether ready: %s", time.Since(began).Round(time.Millisecond))
		other.waitLog(t, 10*time.Second, "McpConnections listed")

		// The first tether's informer watches again: a new object connects.
		began = time.Now()
		c.apply(t, ns, stdioManifest("after-restart", server, nil, ""))
		c.waitObject(t, ns, "after-restart", 60*time.Second, "Connected", connectedAt)
		t.Logf("object created after the restart → Connected: %s", time.Since(began).Round(time.Millisecond))
	})
}

// TestKubernetesLeaderElection runs two replicas: both connect, one writes
// status; killing it hands over within the Lease's bounds.
func TestKubernetesLeaderElection(t *testing.T) {
	c := startCluster(t)
	bin := builtBinaries(t)
	server := filepath.Join(bin, "tether-example-server")
	ns := c.namespace(t, "le")
	const leaseDuration = 3 * time.Second
	flags := []string{"--namespace", ns, "--leader-elect",
		"--leader-elect-lease-duration", leaseDuration.String(),
		"--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms"}
	replicas := map[string]*tether{}
	start := func() {
		tt := startKubeTether(t, c, flags...)
		tt.waitLog(t, 30*time.Second, "identity=")
		id := logValue(tt.logs.String(), "identity=")
		replicas[id] = tt
	}
	start()
	start()

	c.apply(t, ns, stdioManifest("echo", server, nil, ""))
	c.waitObject(t, ns, "echo", 30*time.Second, "Connected", connectedAt)
	// Both replicas connect: each serves the whole gateway.
	for _, r := range replicas {
		r.waitLog(t, 30*time.Second, "connection established")
	}

	leader := func() string {
		return strings.TrimSpace(c.Kubectl(t, "get", "lease", "-n", ns, "tether", "-o", "jsonpath={.spec.holderIdentity}"))
	}
	// writtenBy checks that the status describes the leader's own child:
	// the replicas connect each on their own, and only the leader writes.
	writtenBy := func(id string) {
		t.Helper()
		st := c.waitObject(t, ns, "echo", 30*time.Second, "the leader's child", func(st spec.ConnectionStatus, gen int64) bool {
			return connectedAt(st, gen) && parentPID(st.Process.PID) == replicas[id].cmd.Process.Pid
		})
		for other, r := range replicas {
			if other != id && parentPID(st.Process.PID) == r.cmd.Process.Pid {
				t.Errorf("the status shows the child of %s, not of the leader %s", other, id)
			}
		}
	}
	// handover signals the leader, changes the spec at once and returns how
	// long it took until a status observed the change.
	handover := func(gone string, sig syscall.Signal) time.Duration {
		t.Helper()
		r := replicas[gone]
		delete(replicas, gone)
		began := time.Now()
		_ = r.cmd.Process.Signal(sig)
		c.apply(t, ns, stdioManifest("echo", server, nil, fmt.Sprintf("  toolPrefix: p%d\n", began.UnixNano())))
		c.waitObject(t, ns, "echo", 60*time.Second, "the new generation observed", connectedAt)
		gap := time.Since(began)
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("the old leader did not exit after %s", sig)
		}
		return gap
	}

	first := leader()
	if replicas[first] == nil {
		t.Fatalf("the Lease holder %q is none of the replicas %v", first, keys(replicas))
	}
	writtenBy(first)
	gap := handover(first, syscall.SIGKILL)
	t.Logf("leader killed (SIGKILL) → status written by the next one: %s (lease duration %s)", gap.Round(time.Millisecond), leaseDuration)
	if bound := leaseDuration + 10*time.Second; gap > bound {
		t.Errorf("handover after a kill took %s, over %s", gap, bound)
	}
	second := leader()
	if second == first || replicas[second] == nil {
		t.Fatalf("after the kill the Lease holder is %q (was %q)", second, first)
	}
	writtenBy(second)

	// A leader that stops gracefully releases the Lease and writes no
	// final Stopped status: the next one takes over at its next try, not
	// after a lease duration, and the phase stays Connected.
	start()
	gap = handover(second, syscall.SIGTERM)
	t.Logf("leader stopped (SIGTERM) → status written by the next one: %s", gap.Round(time.Millisecond))
	if gap > leaseDuration+5*time.Second {
		t.Errorf("handover after a graceful stop took %s", gap)
	}
	third := leader()
	if third == second || replicas[third] == nil {
		t.Fatalf("after the stop the Lease holder is %q (was %q)", third, second)
	}
	writtenBy(third)
}

// parentPID is the parent of a process, 0 when it cannot be read.
func parentPID(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...; comm may hold spaces: cut after its ')'.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data)[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// TestKubernetesExampleBothWays applies one example file as a manifest in a
// directory and as an object in the cluster: both connect, to the same spec.
func TestKubernetesExampleBothWays(t *testing.T) {
	example := filepath.Join(repoRoot(t), "examples", "kubernetes", "connections", "demo.yaml")
	data, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	bin := builtBinaries(t)
	path := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "demo.yaml"), string(data))
	startTetherArgs(t, path, "--dir", dir)
	fromFile := waitStatus(t, filepath.Join(dir, "demo.yaml"), "demo", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))

	c := startCluster(t)
	ns := c.namespace(t, "examples")
	startKubeTether(t, c, "--namespace", ns)
	c.Kubectl(t, "apply", "-n", ns, "-f", example)
	fromCluster := c.waitObject(t, ns, "demo", 30*time.Second, "Connected", connectedAt)

	if fromFile.ObservedSpecHash != fromCluster.ObservedSpecHash {
		t.Errorf("the same file gives two specs: %s in a directory, %s in the cluster", fromFile.ObservedSpecHash, fromCluster.ObservedSpecHash)
	}
	if fromFile.Tools.Exposed != fromCluster.Tools.Exposed {
		t.Errorf("exposed tools: %d in a directory, %d in the cluster", fromFile.Tools.Exposed, fromCluster.Tools.Exposed)
	}
}

// waitEvent waits until the object has an Event with reason.
func waitEvent(t *testing.T, c *cluster, ns, name, reason string) {
	t.Helper()
	waitFor(t, 30*time.Second, "an Event "+reason+" on "+name, func() (bool, string) {
		out := c.Kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+name+",reason="+reason, "-o", "name")
		return strings.TrimSpace(out) != "", c.Kubectl(t, "get", "events", "-n", ns)
	})
}

func conditionOf(st spec.ConnectionStatus, typ string) spec.Condition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return spec.Condition{}
}

func tailHas(st spec.ConnectionStatus, line string) bool {
	if st.Process == nil {
		return false
	}
	for _, l := range st.Process.StderrTail {
		if strings.Contains(l, line) {
			return true
		}
	}
	return false
}

// logValue returns the value after key= in the first log line that has it.
func logValue(logs, key string) string {
	_, rest, ok := strings.Cut(logs, key)
	if !ok {
		return ""
	}
	return strings.Fields(rest)[0]
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestKubernetesLeastPrivilege runs tether as a user that holds only the
// Role of examples/kubernetes/rbac.yaml: it lists and watches its objects,
// writes their status, reads the Secret the Role names (and is refused
// another), takes the Lease and records Events. The Deployment and Service
// of the example are accepted by the API server as they are.
func TestKubernetesLeastPrivilege(t *testing.T) {
	c := startClusterWith(t, kubetest.Options{UnprivilegedUser: true})
	bin := builtBinaries(t)
	server := filepath.Join(bin, "tether-example-server")
	examples := filepath.Join(repoRoot(t), "examples", "kubernetes")
	const ns = "mcp"
	c.namespace(t, ns)
	c.Kubectl(t, "apply", "-f", filepath.Join(examples, "rbac.yaml"))
	c.Kubectl(t, "apply", "-f", filepath.Join(examples, "service.yaml"), "-f", filepath.Join(examples, "deployment.yaml"))
	// The test's user stands in for the ServiceAccount (no pods run here).
	c.Kubectl(t, "create", "rolebinding", "tether-test-user", "-n", ns, "--role=tether", "--user="+kubetest.UnprivilegedUser)
	if out, _ := c.KubectlCommand(t.Context(), "auth", "can-i", "list", "secrets", "-n", ns, "--as="+kubetest.UnprivilegedUser).Output(); strings.TrimSpace(string(out)) != "no" {
		t.Fatalf("the Role lets tether list every Secret: can-i says %q", out)
	}
	c.Kubectl(t, "create", "secret", "generic", "-n", ns, "github-mcp", "--from-literal=token=granted-s3cr3t")
	c.Kubectl(t, "create", "secret", "generic", "-n", ns, "other", "--from-literal=token=refused-s3cr3t")

	bin2 := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	tt := startTetherArgs(t, bin2, "--kubernetes", "--kubeconfig", c.UserKubeconfig, "--namespace", ns, "--leader-elect",
		"--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms")
	tt.waitLog(t, 30*time.Second, "leading: this replica writes status")

	reads := func(name, secret string) string {
		return stdioManifest(name, "/bin/sh", []string{"-c", `echo "token=$TOKEN" >&2; exec "$0"`, server},
			"    env:\n      - name: TOKEN\n        valueFrom: {secretKeyRef: {name: "+secret+", key: token}}\n")
	}
	c.apply(t, ns, reads("granted", "github-mcp"))
	c.apply(t, ns, reads("refused", "other"))
	st := c.waitObject(t, ns, "granted", 30*time.Second, "Connected", connectedAt)
	if !tailHas(st, "token=[redacted]") {
		t.Errorf("the child did not get the Secret's value: %q", st.Process.StderrTail)
	}
	c.waitObject(t, ns, "refused", 30*time.Second, "the refusal reported", func(st spec.ConnectionStatus, _ int64) bool {
		return st.Phase == spec.PhaseReconnecting && strings.Contains(st.LastError, `reading Secret mcp/other: secrets "other" is forbidden`)
	})
	waitEvent(t, c, ns, "granted", "Connected")
	if holder := c.Kubectl(t, "get", "lease", "-n", ns, "tether", "-o", "jsonpath={.spec.holderIdentity}"); holder == "" {
		t.Error("no Lease holder")
	}
	if logs := tt.logs.String(); strings.Contains(logs, "granted-s3cr3t") || strings.Contains(logs, "refused-s3cr3t") {
		t.Error("a Secret's value shows in the log")
	}
}
