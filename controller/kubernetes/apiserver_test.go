package kubernetes

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/tether-mcp/tether/controller/kubernetes/kubetest"
)

// TestElectionAndEventsOnAPIServer runs the Elector and the Recorder
// against a real API server: it takes the Lease it writes (schema, times,
// resourceVersions as the API server has them), hands it over on a stop,
// and its Events are deduplicated into one with a count.
func TestElectionAndEventsOnAPIServer(t *testing.T) {
	cp := kubetest.Start(t)
	const ns = "le"
	cp.Kubectl(t, "create", "namespace", ns)
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const lease, renew, retry = 3 * time.Second, 2 * time.Second, 500 * time.Millisecond
	elector := func(id string, logs *syncBuffer) *Elector {
		return NewElector(ElectorOptions{Client: dyn, Namespace: ns, Name: "tether", Identity: id,
			LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
	}
	run := func(e *Elector) (stop func()) {
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- e.Run(runCtx) }()
		stopped := false
		stop = func() {
			if !stopped {
				stopped = true
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}
		}
		t.Cleanup(stop)
		return stop
	}
	leases := dyn.Resource(leasesResource).Namespace(ns)
	record := func() leaseRecord {
		t.Helper()
		obj, err := leases.Get(ctx, "tether", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := readLeaseRecord(obj)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	var aLogs, bLogs syncBuffer
	a, b := elector("a", &aLogs), elector("b", &bLogs)
	stopA := run(a)
	eventually(t, 30*time.Second, "a leads", a.Leading)
	run(b)
	first := record()
	if first.holder != "a" || first.durationSeconds != 3 {
		t.Errorf("Lease = %+v, want holder a for 3s", first)
	}
	// a renews (renewTime moves) and b keeps off.
	eventually(t, 10*time.Second, "a renews", func() bool { return record().renewTime != first.renewTime })
	if b.Leading() || record().holder != "a" {
		t.Fatalf("b leads %v; holder %q", b.Leading(), record().holder)
	}

	// a stops: it releases the Lease and b takes it at its next try.
	began := time.Now()
	stopA()
	eventually(t, 10*time.Second, "b leads", b.Leading)
	if took := time.Since(began); took >= lease {
		t.Errorf("b took the released Lease after %s (lease duration %s)", took, lease)
	}
	if got := record(); got.holder != "b" || got.transitions != 1 {
		t.Errorf("Lease = %+v, want holder b after 1 transition", got)
	}
	if !strings.Contains(aLogs.String(), "released the Lease") {
		t.Errorf("a's log:\n%s", aLogs.String())
	}

	// Events: the same one twice is one Event with count 2.
	rec := NewRecorder(RecorderOptions{Client: dyn, Component: "tether", Host: "b", Logger: slog.New(slog.NewTextHandler(&bLogs, nil))})
	ref := ObjectRef{APIVersion: "tether.dev/v1alpha1", Kind: "McpConnection", Namespace: ns, Name: "echo", UID: "0a1b"}
	rec.Event(ref, eventTypeWarning, "ConnectFailed", "attempt failed: connection refused")
	rec.Event(ref, eventTypeWarning, "ConnectFailed", "attempt failed: connection refused")
	rec.Event(ref, eventTypeNormal, "Connected", "connected to srv 1.0, 5 tools")
	rec.Close()
	list, err := dyn.Resource(eventsResource).Namespace(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=echo"})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, ev := range list.Items {
		reason, _, _ := unstructured.NestedString(ev.Object, "reason")
		n, _, _ := unstructured.NestedInt64(ev.Object, "count")
		counts[reason] += n
		if len(list.Items) != 2 {
			t.Errorf("Event %s: %v", ev.GetName(), ev.Object)
		}
	}
	if len(list.Items) != 2 || counts["ConnectFailed"] != 2 || counts["Connected"] != 1 {
		t.Errorf("%d Events, counts %v; want 2 Events, ConnectFailed ×2 and Connected ×1\n%s", len(list.Items), counts, bLogs.String())
	}
}
