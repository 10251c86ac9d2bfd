package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

// newTestRecorder records into a fake dynamic client at clock.
func newTestRecorder(t *testing.T, clock *fakeClock) (*Recorder, *fake.FakeDynamicClient, *syncBuffer) {
	t.Helper()
	c := fake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{eventsResource: "EventList"})
	logs := &syncBuffer{}
	r := NewRecorder(RecorderOptions{Client: c, Component: "tether", Host: "replica-1",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	r.now = clock.Now
	r.retryDelay = time.Millisecond
	t.Cleanup(r.Close)
	return r, c, logs
}

// events lists the Events of namespace ns, oldest first.
func events(t *testing.T, c *fake.FakeDynamicClient, ns string) []unstructured.Unstructured {
	t.Helper()
	list, err := c.Resource(eventsResource).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool {
		a, _, _ := unstructured.NestedString(items[i].Object, "firstTimestamp")
		b, _, _ := unstructured.NestedString(items[j].Object, "firstTimestamp")
		return a < b || a == b && items[i].GetName() < items[j].GetName()
	})
	return items
}

func field(t *testing.T, ev unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(ev.Object, path...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var echoRef = ObjectRef{APIVersion: "tether.dev/v1alpha1", Kind: "McpConnection", Namespace: "mcp", Name: "echo", UID: "uid-1"}

// TestRecorderEvent: an Event as kubectl shows it: about the object, with
// tether and the replica as its source.
func TestRecorderEvent(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	r, c, _ := newTestRecorder(t, clock)
	r.Event(echoRef, eventTypeNormal, "Connected", "connected to srv 1.0, 5 tools")
	r.Close()
	evs := events(t, c, "mcp")
	if len(evs) != 1 {
		t.Fatalf("%d Events, want 1", len(evs))
	}
	ev := evs[0]
	want := map[string]any{
		"apiVersion": "v1", "kind": "Event", "type": "Normal", "reason": "Connected",
		"message": "connected to srv 1.0, 5 tools", "count": int64(1),
		"firstTimestamp": "2026-11-23T10:00:00Z", "lastTimestamp": "2026-11-23T10:00:00Z",
		"source":         map[string]any{"component": "tether", "host": "replica-1"},
		"involvedObject": map[string]any{"apiVersion": "tether.dev/v1alpha1", "kind": "McpConnection", "namespace": "mcp", "name": "echo", "uid": "uid-1"},
	}
	for k, v := range want {
		if got := field(t, ev, k); fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	if name := ev.GetName(); name != fmt.Sprintf("echo.%x", clock.Now().UnixNano()) {
		t.Errorf("name %q", name)
	}
}

// TestRecorderDeduplicates: the same Event again increments the count and
// lastTimestamp of the one written (a patch); another message is another
// Event.
func TestRecorderDeduplicates(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	r, c, _ := newTestRecorder(t, clock)
	r.Event(echoRef, eventTypeWarning, "ConnectFailed", "attempt failed: connection refused")
	clock.Step(time.Minute)
	r.Event(echoRef, eventTypeWarning, "ConnectFailed", "attempt failed: connection refused")
	clock.Step(time.Minute)
	r.Event(echoRef, eventTypeWarning, "ConnectFailed", "attempt failed: connection refused")
	r.Event(echoRef, eventTypeWarning, "ConnectFailed", "attempt failed: 401 Unauthorized")
	r.Close()
	evs := events(t, c, "mcp")
	if len(evs) != 2 {
		t.Fatalf("%d Events, want 2: %v", len(evs), evs)
	}
	if got := field(t, evs[0], "count"); got != int64(3) {
		t.Errorf("count = %v, want 3", got)
	}
	if got := field(t, evs[0], "firstTimestamp"); got != "2026-11-23T10:00:00Z" {
		t.Errorf("firstTimestamp = %v", got)
	}
	if got := field(t, evs[0], "lastTimestamp"); got != "2026-11-23T10:02:00Z" {
		t.Errorf("lastTimestamp = %v, want 10:02", got)
	}
	if got := field(t, evs[1], "message"); got != "attempt failed: 401 Unauthorized" {
		t.Errorf("second Event's message = %v", got)
	}
	patches := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
	}
	if patches != 2 {
		t.Errorf("%d patches, want 2", patches)
	}
}

// TestRecorderAggregates: the 10th different message for one object and
// reason within 10 minutes starts one combined Event, which the next ones
// update.
func TestRecorderAggregates(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	r, c, _ := newTestRecorder(t, clock)
	for i := range 12 {
		r.Event(echoRef, eventTypeWarning, "ConnectFailed", fmt.Sprintf("attempt %d failed", i))
		clock.Step(time.Second)
	}
	r.Close()
	evs := events(t, c, "mcp")
	if len(evs) != 10 {
		t.Fatalf("%d Events, want 9 single ones and 1 combined", len(evs))
	}
	last := evs[9]
	if got := field(t, last, "message"); got != "(combined from similar events): attempt 11 failed" {
		t.Errorf("combined message = %v", got)
	}
	if got := field(t, last, "count"); got != int64(3) {
		t.Errorf("combined count = %v, want 3", got)
	}
}

// TestRecorderRateLimits: 25 Events per object and type, then one every 5
// minutes.
func TestRecorderRateLimits(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	r, c, _ := newTestRecorder(t, clock)
	for i := range 30 {
		r.Event(echoRef, eventTypeNormal, fmt.Sprintf("Reason%d", i), "m")
	}
	clock.Step(5 * time.Minute)
	r.Event(echoRef, eventTypeNormal, "Later", "m")
	other := echoRef
	other.Name = "other"
	r.Event(other, eventTypeNormal, "Connected", "m")
	r.Close()
	if n := len(events(t, c, "mcp")); n != 25+1+1 {
		t.Errorf("%d Events, want 25, 1 after 5 minutes and 1 about another object", n)
	}
}

// TestRecorderRetries: a write that fails for want of the API server is
// tried again; one the API server refuses is not.
func TestRecorderRetries(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	r, c, logs := newTestRecorder(t, clock)
	var creates atomic.Int32
	c.PrependReactor("create", "events", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured)
		n := creates.Add(1)
		switch {
		case obj.Object["reason"] == "Forbidden":
			return true, nil, apierrors.NewForbidden(eventsResource.GroupResource(), obj.GetName(), errors.New("no"))
		case n <= 2:
			return true, nil, errors.New("dial tcp: connection refused")
		}
		return false, nil, nil
	})
	r.Event(echoRef, eventTypeNormal, "Connected", "m")
	r.Event(echoRef, eventTypeNormal, "Forbidden", "m")
	r.Close()
	if n := len(events(t, c, "mcp")); n != 1 {
		t.Errorf("%d Events, want 1 (after 2 failed tries)", n)
	}
	if n := creates.Load(); n != 4 {
		t.Errorf("%d creates, want 3 of the first Event and 1 of the refused one", n)
	}
	if !strings.Contains(logs.String(), "the API server refused an Event") {
		t.Errorf("the refusal is not logged:\n%s", logs.String())
	}
}

// TestRecorderPatchOfAGoneEvent: an Event that is gone (its TTL) is created
// again rather than patched.
func TestRecorderPatchOfAGoneEvent(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	r, c, _ := newTestRecorder(t, clock)
	// Driven here without the writing goroutine, one write at a time.
	r.Close()
	r.ctx = context.Background()
	record := func() {
		t.Helper()
		w, ok := r.correlate(pendingEvent{ref: echoRef, typ: eventTypeNormal, reason: "Connected", message: "m", at: clock.Now()})
		if !ok {
			t.Fatal("the Event was rate-limited")
		}
		if err := r.write(w); err != nil {
			t.Fatal(err)
		}
	}
	record()
	evs := events(t, c, "mcp")
	if len(evs) != 1 {
		t.Fatalf("%d Events", len(evs))
	}
	if err := c.Resource(eventsResource).Namespace("mcp").Delete(context.Background(), evs[0].GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	record()
	evs = events(t, c, "mcp")
	if len(evs) != 1 || field(t, evs[0], "count") != int64(2) {
		t.Errorf("after the Event was gone: %v", evs)
	}
}

// TestRecorderAfterClose: Events after Close are dropped, without a panic.
func TestRecorderAfterClose(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	r, c, _ := newTestRecorder(t, clock)
	r.Close()
	r.Event(echoRef, eventTypeNormal, "Connected", "m")
	r.Close()
	if n := len(events(t, c, "mcp")); n != 0 {
		t.Errorf("%d Events after Close", n)
	}
}

func TestLRU(t *testing.T) {
	c := newLRU[string, int](2)
	c.add("a", 1)
	c.add("b", 2)
	c.get("a") // a is now the most recent
	c.add("c", 3)
	if _, ok := c.get("b"); ok {
		t.Error("b, the least recently used, was kept")
	}
	if v, ok := c.get("a"); !ok || v != 1 {
		t.Errorf("a = %v, %v", v, ok)
	}
	if v, ok := c.get("c"); !ok || v != 3 {
		t.Errorf("c = %v, %v", v, ok)
	}
}
