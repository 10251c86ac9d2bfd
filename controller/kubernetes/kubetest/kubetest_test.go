package kubetest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// TestControlPlane drives a control plane the way the Kubernetes-mode tests
// will: objects written with client-go, read back with kubectl, RBAC
// enforced for the unprivileged user, and an informer and the stored objects
// surviving a restart of the apiserver.
func TestControlPlane(t *testing.T) {
	began := time.Now()
	cp := StartWithOptions(t, Options{UnprivilegedUser: true})
	t.Logf("time to ready: %s", time.Since(began).Round(time.Millisecond))
	logRSS(t, cp, "at ready")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}

	const ns = "kubetest-e2e"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	created, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Data:       map[string]string{"greeting": "hello"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create configmap %s/probe: %v", ns, err)
	}

	if out := cp.Kubectl(t, "get", "ns", "-o", "name"); !containsLine(out, "namespace/"+ns) {
		t.Fatalf("kubectl get ns -o name: namespace/%s missing from:\n%s", ns, out)
	}
	if got := cp.Kubectl(t, "get", "configmap", "probe", "-n", ns, "-o", "jsonpath={.data.greeting}"); got != "hello" {
		t.Fatalf("kubectl get configmap probe: data.greeting = %q, want hello", got)
	}

	// RBAC is on: the unprivileged user may not read what the admin wrote.
	userCS, err := kubernetes.NewForConfig(cp.UserConfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := userCS.CoreV1().ConfigMaps(ns).Get(ctx, "probe", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("get configmap as %s: err = %v, want Forbidden", UnprivilegedUser, err)
	}

	// An informer started before the restart must resume after it.
	seen := make(chan string, 16)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				seen <- cm.Name
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	infCtx, stopInf := context.WithCancel(ctx)
	defer func() { stopInf(); factory.Shutdown() }()
	factory.Start(infCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	waitSeen(t, seen, "probe")

	cp.RestartAPIServer(t)

	got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "probe", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get configmap %s/probe after the restart: %v", ns, err)
	}
	if got.UID != created.UID || got.Data["greeting"] != "hello" {
		t.Fatalf("configmap after the restart: uid %s data %v, want uid %s data greeting=hello", got.UID, got.Data, created.UID)
	}
	if out := cp.Kubectl(t, "get", "configmap", "-n", ns, "-o", "name"); !containsLine(out, "configmap/probe") {
		t.Fatalf("kubectl get configmap after the restart: configmap/probe missing from:\n%s", out)
	}

	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-restart"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap %s/after-restart: %v", ns, err)
	}
	waitSeen(t, seen, "after-restart")
	logRSS(t, cp, "at the end")
}

// TestMissingBinaries checks the lookup of the binaries: an empty
// directory skips the test, or fails it under CI=true.
func TestMissingBinaries(t *testing.T) {
	t.Setenv(BinDirEnv, t.TempDir())
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		findBinaries(r)
	}()
	<-done
	want := "skipped"
	if os.Getenv("CI") == "true" {
		want = "failed"
	}
	if r.outcome != want || !strings.Contains(r.msg, installScript) {
		t.Fatalf("findBinaries on an empty directory: %s %q, want %s naming %s", r.outcome, r.msg, want, installScript)
	}
}

// recorder is a testing.TB whose Skipf and Fatalf record the outcome and end
// the goroutine, so a test can check how a helper gives up.
type recorder struct {
	testing.TB
	outcome, msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.outcome, r.msg = "skipped", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.outcome, r.msg = "failed", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// waitSeen waits until the informer has delivered an Add for name.
func waitSeen(t *testing.T, seen <-chan string, name string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case n := <-seen:
			if n == name {
				return
			}
		case <-timeout:
			t.Fatalf("the informer did not see configmap %s within a minute", name)
		}
	}
}

func containsLine(out, line string) bool {
	for l := range strings.Lines(out) {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// logRSS logs the resident memory of etcd and kube-apiserver.
func logRSS(t *testing.T, cp *ControlPlane, when string) {
	t.Helper()
	var parts []string
	for _, p := range []*process{cp.apiserver, cp.etcd} {
		parts = append(parts, fmt.Sprintf("%s %s", p.name, rss(p.cmd.Process.Pid)))
	}
	t.Logf("RSS %s: %s", when, strings.Join(parts, ", "))
}

// rss reads VmRSS from /proc (Linux); elsewhere it says it cannot.
func rss(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "unknown"
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(v)
			if kb, err := strconv.Atoi(f[0]); err == nil {
				return fmt.Sprintf("%.0f MB", float64(kb)/1024)
			}
		}
	}
	return "unknown"
}
