package kubernetes

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/kubernetes/kubetest"
	"github.com/tether-mcp/tether/spec"
)

// syncBuffer is a log destination the test reads while the source writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// changes records what a Source tells the controller.
type changes struct {
	mu    sync.Mutex
	names []string
}

func (c *changes) add(names []string) {
	c.mu.Lock()
	c.names = append(c.names, names...)
	c.mu.Unlock()
}

func (c *changes) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, x := range c.names {
		if x == name {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds, failing after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never %s within %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSourceAndStatusWriter drives the Source and the StatusWriter against a
// real API server: what reaches the store, what does not (the object's own
// status writes), Secret versions, and writes only when the status changed.
func TestSourceAndStatusWriter(t *testing.T) {
	cp := kubetest.Start(t)
	const ns = "src"
	cp.Kubectl(t, "create", "namespace", ns)
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Started before the CRD is installed: it says what is missing, and
	// syncs once the CRD is there.
	var logs syncBuffer
	store := desired.NewStore()
	src := NewSource(SourceOptions{Client: dyn, Namespace: ns, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, store)
	var seen changes
	synced := make(chan struct{})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx, seen.add, func() { close(synced) }) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	eventually(t, 30*time.Second, "a word about the missing CRD", func() bool {
		return strings.Contains(logs.String(), "is the CRD installed?")
	})
	select {
	case <-synced:
		t.Fatal("synced without the CRD")
	default:
	}
	cp.Kubectl(t, "apply", "-f", filepath.Join("..", "..", "examples", "kubernetes", "crd.yaml"))
	cp.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/mcpconnections.tether.dev")
	select {
	case <-synced:
	case <-ctx.Done():
		t.Fatal("the source never synced")
	}

	objects := dyn.Resource(Resource).Namespace(ns)
	secrets := dyn.Resource(secretsResource).Namespace(ns)
	putSecret := func(data map[string]string) {
		t.Helper()
		s := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: "tok", Namespace: ns}, StringData: data}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := secrets.Apply(ctx, "tok", &unstructured.Unstructured{Object: u}, metav1.ApplyOptions{FieldManager: "test", Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	putSecret(map[string]string{"token": "one", "unused": "a"})

	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": spec.APIVersion, "kind": spec.Kind,
		"metadata": map[string]any{"name": "gh", "namespace": ns},
		"spec": map[string]any{"http": map[string]any{
			"url":     "https://example.com/mcp",
			"headers": []any{map[string]any{"name": "Authorization", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "tok", "key": "token"}}}},
		}},
	}}
	created, err := objects.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the object in the store", func() bool { _, ok := store.Get("gh"); return ok })
	e, _ := store.Get("gh")
	if e.Origin != ns+"/gh" || e.Generation != 1 || e.Conn == nil || e.SecretsVersion == "" || e.ManifestError != "" {
		t.Fatalf("entry = %+v", e)
	}
	first := e.SecretsVersion

	// Reading the Secret at connect time.
	val, err := src.SecretsFor("gh").SecretValue(ctx, "tok", "token")
	if err != nil || val != "one" {
		t.Errorf("SecretValue = %q, %v", val, err)
	}
	if _, err := src.SecretsFor("gh").SecretValue(ctx, "tok", "missing"); err == nil || err.Error() != "the Secret src/tok has no key missing" {
		t.Errorf("a missing key: %v", err)
	}

	// The status writer writes once; the same status again is no write,
	// and the object's status change reaches nothing in the store.
	leading := true
	w := NewStatusWriter(StatusOptions{Client: dyn, Objects: src.Object, Leading: func() bool { return leading }})
	now := time.Now().UTC().Truncate(time.Second)
	st := spec.ConnectionStatus{Phase: spec.PhaseConnected, ObservedGeneration: 1,
		Conditions: []spec.Condition{{Type: spec.ConditionReady, Status: spec.ConditionTrue, Reason: "Connected", Message: "ok", LastTransitionTime: now}}}
	before := seen.count("gh")
	if err := w.Put(e, st); err != nil {
		t.Fatal(err)
	}
	var written string
	eventually(t, 10*time.Second, "the status in the informer", func() bool {
		o, ok := src.Object(e.Origin)
		if ok && o.GetResourceVersion() != created.GetResourceVersion() {
			written = o.GetResourceVersion()
			return true
		}
		return false
	})
	if prev, ok := w.Previous(e); !ok || prev.Phase != spec.PhaseConnected || prev.ObservedGeneration != 1 || !prev.Conditions[0].LastTransitionTime.Equal(now) {
		t.Errorf("Previous = %+v, %v", prev, ok)
	}
	if err := w.Put(e, st); err != nil {
		t.Fatal(err)
	}
	w.Forget() // as a new leader: compares with the object itself
	if err := w.Put(e, st); err != nil {
		t.Fatal(err)
	}
	if o, _ := objects.Get(ctx, "gh", metav1.GetOptions{}); o.GetResourceVersion() != written {
		t.Errorf("an unchanged status was written again: resourceVersion %s → %s", written, o.GetResourceVersion())
	}
	if n := seen.count("gh"); n != before {
		t.Errorf("the object's own status write was told to the controller (%d → %d)", before, n)
	}
	leading = false
	st.Phase = spec.PhaseReconnecting
	if err := w.Put(e, st); err != nil {
		t.Fatal(err)
	}
	if o, _ := objects.Get(ctx, "gh", metav1.GetOptions{}); o.GetResourceVersion() != written {
		t.Error("a replica that does not lead wrote status")
	}

	// A key the spec does not read changes nothing; the one it reads
	// changes the version (a reconnect), and so does the Secret's removal.
	putSecret(map[string]string{"token": "one", "unused": "b"})
	putSecret(map[string]string{"token": "two", "unused": "b"})
	// The store changes first, then the controller is told: wait for both.
	eventually(t, 10*time.Second, "a new Secrets version, told", func() bool {
		e, _ := store.Get("gh")
		return e.SecretsVersion != first && seen.count("gh") > before
	})
	if n := seen.count("gh"); n != before+1 {
		t.Errorf("changes told for two Secret updates, one of a key nobody reads: %d, want 1", n-before)
	}
	if val, _ := src.SecretsFor("gh").SecretValue(ctx, "tok", "token"); val != "two" {
		t.Errorf("after the rotation the value is %q", val)
	}
	second, _ := store.Get("gh")
	if err := secrets.Delete(ctx, "tok", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the Secret's removal, told", func() bool {
		e, _ := store.Get("gh")
		return e.SecretsVersion != second.SecretsVersion && seen.count("gh") > before+1
	})
	// Told in order: a change told for the unused key would show here.
	if n := seen.count("gh"); n != before+2 {
		t.Errorf("changes told for the rotation and the removal: %d, want 2", n-before)
	}
	if _, err := src.SecretsFor("gh").SecretValue(ctx, "tok", "token"); err == nil || err.Error() != "the Secret src/tok does not exist" {
		t.Errorf("a removed Secret: %v", err)
	}

	// A bad edit keeps the last valid spec, with the error; the generation
	// moves.
	patch := []byte(`{"spec":{"backoff":{"initial":"5s","max":"1s"}}}`)
	if _, err := objects.Patch(ctx, "gh", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the bad edit in the store", func() bool { e, _ := store.Get("gh"); return e.ManifestError != "" })
	bad, _ := store.Get("gh")
	if bad.Conn != second.Conn || bad.Generation != 2 {
		t.Errorf("after a bad edit: spec kept %v, generation %d", bad.Conn == second.Conn, bad.Generation)
	}

	// Deleting the object removes its entry and stops its Secret's watch.
	if err := objects.Delete(ctx, "gh", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the entry removed", func() bool { _, ok := store.Get("gh"); return !ok })
	src.secrets.mu.Lock()
	left := len(src.secrets.watches)
	src.secrets.mu.Unlock()
	if left != 0 {
		t.Errorf("%d Secret watches left after the object went", left)
	}
}
