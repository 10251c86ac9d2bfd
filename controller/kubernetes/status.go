package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/spec"
)

// EventRecorder is what the status writer records Events with (Recorder).
type EventRecorder interface {
	Event(ref ObjectRef, eventtype, reason, message string)
}

// StatusOptions configures a StatusWriter.
type StatusOptions struct {
	Client dynamic.Interface
	// Objects returns an entry's object (by Origin) from the informer's
	// cache: Source.Object.
	Objects func(origin string) (*unstructured.Unstructured, bool)
	// Leading reports whether this replica writes status (it holds the
	// Lease; always true without leader election).
	Leading func() bool
	// Events, when set, receives an Event for each transition written.
	Events EventRecorder
	Logger *slog.Logger
	// WriteTimeout bounds one status write (default 10s).
	WriteTimeout time.Duration
}

// StatusWriter is the StatusSink of Kubernetes mode: it writes each
// connection's status document (the same as a status file's, with
// observedGeneration) to its object's status subresource. Only the leader
// writes, and only what differs from the status the object has.
type StatusWriter struct {
	opts StatusOptions
	log  *slog.Logger

	mu      sync.Mutex
	written map[string]writtenStatus // connection → the last status this replica wrote
}

// writtenStatus is a status this replica wrote, and the resourceVersions the
// object had just before and just after, to tell whether the informer's
// copy is older than the write or newer.
type writtenStatus struct {
	uid        types.UID
	status     map[string]any
	before, rv string
}

// NewStatusWriter returns a status writer.
func NewStatusWriter(opts StatusOptions) *StatusWriter {
	if opts.Leading == nil {
		opts.Leading = func() bool { return true }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	return &StatusWriter{opts: opts, log: opts.Logger, written: map[string]writtenStatus{}}
}

// Previous returns the status the object has, so that transition times and
// counters carry on from whichever replica wrote it.
func (w *StatusWriter) Previous(e desired.Entry) (spec.ConnectionStatus, bool) {
	obj, ok := w.opts.Objects(e.Origin)
	if !ok {
		return spec.ConnectionStatus{}, false
	}
	raw, ok := obj.Object["status"].(map[string]any)
	if !ok {
		return spec.ConnectionStatus{}, false
	}
	var st spec.ConnectionStatus
	b, err := json.Marshal(raw)
	if err != nil || json.Unmarshal(b, &st) != nil || st.Phase == "" {
		return spec.ConnectionStatus{}, false
	}
	return st, true
}

// Forget drops what this replica remembers writing, so that the next Put of
// each connection compares with the objects themselves: a new leader calls
// it before it reconciles everything again.
func (w *StatusWriter) Forget() {
	w.mu.Lock()
	w.written = map[string]writtenStatus{}
	w.mu.Unlock()
}

// Put writes st to e's object when this replica leads and st differs from
// what the object has, and records an Event for each transition.
func (w *StatusWriter) Put(e desired.Entry, st spec.ConnectionStatus) error {
	if !w.opts.Leading() {
		return nil
	}
	obj, ok := w.opts.Objects(e.Origin)
	if !ok {
		return nil // deleted meanwhile: nothing to write to
	}
	want, err := statusMap(st)
	if err != nil {
		return err
	}
	have := w.current(e.Name, obj)
	if reflect.DeepEqual(want, have) {
		return nil
	}
	patch, err := json.Marshal([]map[string]any{{"op": "add", "path": "/status", "value": want}})
	if err != nil {
		return fmt.Errorf("encoding the status of %s: %w", e.Origin, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.WriteTimeout)
	defer cancel()
	got, err := w.opts.Client.Resource(Resource).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(),
		types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}, "status")
	switch {
	case apierrors.IsNotFound(err):
		return nil // deleted meanwhile
	case err != nil:
		return fmt.Errorf("writing the status of McpConnection %s: %w", e.Origin, err)
	}
	w.mu.Lock()
	w.written[e.Name] = writtenStatus{uid: obj.GetUID(), status: want, before: obj.GetResourceVersion(), rv: got.GetResourceVersion()}
	w.mu.Unlock()
	w.record(obj, have, st)
	return nil
}

// fieldManager names tether in the objects' managedFields.
const fieldManager = "tether"

// current is the status the object has: the informer's copy, unless this
// replica wrote since that copy was made (the informer lags a write), in
// which case what it wrote.
func (w *StatusWriter) current(name string, obj *unstructured.Unstructured) map[string]any {
	w.mu.Lock()
	ws, ok := w.written[name]
	w.mu.Unlock()
	if ok && ws.uid == obj.GetUID() && (obj.GetResourceVersion() == ws.before || obj.GetResourceVersion() == ws.rv) {
		return ws.status
	}
	have, _ := obj.Object["status"].(map[string]any)
	if have == nil {
		return nil
	}
	norm, err := normalize(have)
	if err != nil {
		return nil
	}
	return norm
}

// Delete forgets a connection whose object is gone (and its status with it).
func (w *StatusWriter) Delete(name string) error {
	w.mu.Lock()
	delete(w.written, name)
	w.mu.Unlock()
	return nil
}

// statusMap is st as the object stores it: its JSON form, without nulls
// (the API server drops them).
func statusMap(st spec.ConnectionStatus) (map[string]any, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encoding status: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("encoding status: %w", err)
	}
	return dropNulls(m), nil
}

// normalize gives a status read from an object the form statusMap gives:
// numbers as float64, no nulls.
func normalize(m map[string]any) (map[string]any, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return dropNulls(out), nil
}

func dropNulls(m map[string]any) map[string]any {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			m[k] = dropNulls(x)
		case []any:
			for i, item := range x {
				if im, ok := item.(map[string]any); ok {
					x[i] = dropNulls(im)
				}
			}
		}
	}
	return m
}

// record emits the Events of the transitions from the status the object had
// to st.
func (w *StatusWriter) record(obj *unstructured.Unstructured, had map[string]any, st spec.ConnectionStatus) {
	if w.opts.Events == nil {
		return
	}
	var prev *spec.ConnectionStatus
	if had != nil {
		var p spec.ConnectionStatus
		if b, err := json.Marshal(had); err == nil && json.Unmarshal(b, &p) == nil {
			prev = &p
		}
	}
	ref := ObjectRef{
		APIVersion: spec.APIVersion, Kind: spec.Kind,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
	}
	for _, ev := range transitions(prev, &st) {
		w.opts.Events.Event(ref, ev.Type, ev.Reason, ev.Message)
	}
}
