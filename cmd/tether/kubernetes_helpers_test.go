//go:build unix

package main

// Helpers for the Kubernetes-mode end-to-end tests: a real kube-apiserver and
// etcd (controller/kubernetes/kubetest), the CRD of examples/kubernetes,
// objects written with kubectl as a user would, and status read back through
// the API.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/tether-mcp/tether/controller/kubernetes"
	"github.com/tether-mcp/tether/controller/kubernetes/kubetest"
	"github.com/tether-mcp/tether/spec"
)

// cluster is a control plane with tether's CRD installed.
type cluster struct {
	*kubetest.ControlPlane
	dyn dynamic.Interface
}

// startCluster starts a control plane and installs the CRD of
// examples/kubernetes/crd.yaml, waiting until it is established.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	return startClusterWith(t, kubetest.Options{})
}

// startClusterWith is startCluster with the control plane's options.
func startClusterWith(t *testing.T, opts kubetest.Options) *cluster {
	t.Helper()
	cp := kubetest.StartWithOptions(t, opts)
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{ControlPlane: cp, dyn: dyn}
	c.Kubectl(t, "apply", "-f", filepath.Join(repoRoot(t), "examples", "kubernetes", "crd.yaml"))
	c.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/mcpconnections.tether.dev")
	return c
}

// namespace creates a namespace for one test.
func (c *cluster) namespace(t *testing.T, name string) string {
	t.Helper()
	c.Kubectl(t, "create", "namespace", name)
	return name
}

// apply runs kubectl apply on a manifest given as text.
func (c *cluster) apply(t *testing.T, ns, manifest string) {
	t.Helper()
	c.kubectlStdin(t, manifest, "apply", "-n", ns, "-f", "-")
}

func (c *cluster) kubectlStdin(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	return kubectlStdin(t, c.ControlPlane, stdin, args...)
}

// object reads an McpConnection; nil when it does not exist.
func (c *cluster) object(t testing.TB, ns, name string) *unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obj, err := c.dyn.Resource(kubernetes.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get mcpconnection %s/%s: %v", ns, name, err)
	}
	return obj
}

// objectStatus is an object's status, decoded as tether's status type, and
// its metadata.generation; ok is false while it has no status.
func objectStatus(t testing.TB, obj *unstructured.Unstructured) (st spec.ConnectionStatus, generation int64, ok bool) {
	t.Helper()
	raw, found := obj.Object["status"]
	if !found {
		return st, obj.GetGeneration(), false
	}
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields() // the object's status is exactly tether's document
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("status of %s/%s is not a status document: %v\n%s", obj.GetNamespace(), obj.GetName(), err, b)
	}
	return st, obj.GetGeneration(), true
}

// waitObject polls an object's status until ok accepts it (with the object's
// generation), failing after timeout with the last status seen.
func (c *cluster) waitObject(t testing.TB, ns, name string, timeout time.Duration, what string, ok func(st spec.ConnectionStatus, generation int64) bool) spec.ConnectionStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		if obj := c.object(t, ns, name); obj != nil {
			st, gen, found := objectStatus(t, obj)
			if found && ok(st, gen) {
				return st
			}
			last = fmt.Sprintf("generation %d, status (found=%v) %+v", gen, found, st)
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcpconnection %s/%s never showed %s within %v; last: %s", ns, name, what, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// connectedAt is a status condition: Connected, describing the object's
// current generation.
func connectedAt(st spec.ConnectionStatus, generation int64) bool {
	return st.Phase == spec.PhaseConnected && st.ObservedGeneration == generation
}

// startKubeTether runs `tether run --kubernetes` against the cluster with
// extra flags; the gateway and metrics listeners are off unless the flags
// turn them on. The example server's directory is on its PATH.
func startKubeTether(t *testing.T, c *cluster, extra ...string) *tether {
	t.Helper()
	bin := builtBinaries(t)
	args := append([]string{"--kubernetes", "--kubeconfig", c.Kubeconfig}, extra...)
	return startTetherArgs(t, []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}, args...)
}

// startTetherArgs runs `tether run` with exactly these flags (after the
// defaults that turn the listeners off).
func startTetherArgs(t *testing.T, env []string, extra ...string) *tether {
	t.Helper()
	bin := builtBinaries(t)
	args := append([]string{"run", "--listen", "", "--metrics-addr", "", "--log-level", "debug"}, extra...)
	cmd := exec.Command(filepath.Join(bin, "tether"), args...)
	cmd.Env = append(os.Environ(), env...)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tt := &tether{t: t, cmd: cmd, logs: logs, done: make(chan struct{})}
	go func() { tt.err = cmd.Wait(); close(tt.done) }()
	t.Cleanup(func() {
		tt.stop()
		if t.Failed() {
			t.Logf("tether %v logs:\n%s", extra, logs.String())
		}
	})
	return tt
}
