package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-mcp/tether/spec"
)

// secretsResource is the core v1 Secret resource.
var secretsResource = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// secretWatch watches the Secrets that connections read, each with an
// informer of its own narrowed to that one Secret (a field selector on
// metadata.name): tether caches no Secret it does not use, and RBAC can grant
// get, list and watch on exactly those names (resourceNames). An informer
// runs while at least one connection reads its Secret.
type secretWatch struct {
	client dynamic.Interface
	log    *slog.Logger
	// changed is told the connections that read a Secret that changed. It
	// runs on the Secret's informer goroutine.
	changed func(connections []string)

	mu       sync.Mutex
	watches  map[string]*watchedSecret // namespace/name → its informer
	byConn   map[string][]string       // connection → the namespace/name keys it reads
	stopped  bool
	finished sync.WaitGroup
}

type watchedSecret struct {
	namespace, name string
	informer        cache.SharedIndexInformer
	stop            chan struct{}
	users           map[string]bool // connections
	waited          bool            // waitSynced waited for it once
}

func newSecretWatch(client dynamic.Interface, log *slog.Logger, changed func([]string)) *secretWatch {
	return &secretWatch{client: client, log: log, changed: changed,
		watches: map[string]*watchedSecret{}, byConn: map[string][]string{}}
}

// track records that conn reads refs of Secrets in namespace (nil: none any
// more), starting the watches it needs and stopping those nobody needs.
func (w *secretWatch) track(conn, namespace string, refs []spec.SecretKeySelector) {
	var keys []string
	for _, r := range refs {
		if k := origin(namespace, r.Name); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	old := w.byConn[conn]
	if len(keys) == 0 {
		delete(w.byConn, conn)
	} else {
		w.byConn[conn] = keys
	}
	for _, k := range old {
		if slices.Contains(keys, k) {
			continue
		}
		ws := w.watches[k]
		delete(ws.users, conn)
		if len(ws.users) == 0 {
			close(ws.stop)
			delete(w.watches, k)
			w.log.Debug("stopped watching a Secret no connection reads", "secret", k)
		}
	}
	for _, k := range keys {
		ws := w.watches[k]
		if ws == nil {
			ws = w.startLocked(namespace, k[len(namespace)+1:])
			w.watches[k] = ws
		}
		ws.users[conn] = true
	}
}

// startLocked starts the informer of one Secret.
func (w *secretWatch) startLocked(namespace, name string) *watchedSecret {
	inf := newInformer(w.client, secretsResource, namespace, 0, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
	ws := &watchedSecret{namespace: namespace, name: name, informer: inf,
		stop: make(chan struct{}), users: map[string]bool{}}
	key := origin(namespace, name)
	notify := func(any) {
		w.mu.Lock()
		var users []string
		if cur := w.watches[key]; cur == ws {
			for u := range ws.users {
				users = append(users, u)
			}
		}
		w.mu.Unlock()
		slices.Sort(users)
		if len(users) > 0 {
			w.changed(users)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, o any) { notify(o) },
		DeleteFunc: notify,
	})
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		w.log.Warn("cannot watch a Secret that a connection reads", "secret", key, "err", err)
	})
	w.finished.Add(1)
	go func() {
		defer w.finished.Done()
		inf.Run(ws.stop)
	}()
	w.log.Debug("watching a Secret", "secret", key)
	return ws
}

// waitSynced waits, up to bound, for the watches of refs that no one waited
// for yet to list their Secret, so that a new connection's first version
// already covers the values (a version that moves once the watch syncs would
// reconnect a session that just connected). A watch that cannot list (RBAC)
// is waited for once, not at every change of every object.
func (w *secretWatch) waitSynced(namespace string, refs []spec.SecretKeySelector, bound time.Duration) {
	var pending []cache.InformerSynced
	w.mu.Lock()
	for _, r := range refs {
		if ws := w.watches[origin(namespace, r.Name)]; ws != nil && !ws.waited {
			ws.waited = true
			pending = append(pending, ws.informer.HasSynced)
		}
	}
	w.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	timeout := make(chan struct{})
	t := time.AfterFunc(bound, func() { close(timeout) })
	defer t.Stop()
	cache.WaitForCacheSync(timeout, pending...)
}

// stop stops every informer and waits for them.
func (w *secretWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	for k, ws := range w.watches {
		close(ws.stop)
		delete(w.watches, k)
	}
	w.mu.Unlock()
	w.finished.Wait()
}

// version fingerprints the values that refs read in namespace as the
// watches have them now: a rotated value, a Secret or key that appears or
// goes, or a watch that syncs changes it. It is a hash, never a value; ""
// when refs is empty.
func (w *secretWatch) version(namespace string, refs []spec.SecretKeySelector) string {
	if len(refs) == 0 {
		return ""
	}
	h := sha256.New()
	for _, r := range refs {
		fmt.Fprintf(h, "%s\x00%s\x00", r.Name, r.Key)
		obj, state := w.cached(namespace, r.Name)
		h.Write([]byte(state))
		if obj != nil {
			if v, ok, _ := unstructured.NestedString(obj.Object, "data", r.Key); ok {
				h.Write([]byte{1})
				h.Write([]byte(v))
			}
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// cached returns the Secret as its watch has it, and a word for the watch's
// state: "unwatched", "syncing", "absent" or "present".
func (w *secretWatch) cached(namespace, name string) (*unstructured.Unstructured, string) {
	w.mu.Lock()
	ws := w.watches[origin(namespace, name)]
	w.mu.Unlock()
	if ws == nil {
		return nil, "unwatched"
	}
	if !ws.informer.HasSynced() {
		return nil, "syncing"
	}
	o, ok, _ := ws.informer.GetStore().GetByKey(origin(namespace, name))
	if !ok {
		return nil, "absent"
	}
	u, _ := o.(*unstructured.Unstructured)
	return u, "present"
}

// reader returns the SecretReader of the connections of one namespace.
func (w *secretWatch) reader(namespace string) *secretReader {
	return &secretReader{w: w, namespace: namespace}
}

// secretReader reads the Secrets of one namespace at connect time: from the
// Secret's watch once it has synced (what the version was computed from),
// else straight from the API server, so that a watch that cannot list (RBAC)
// gives the API server's own answer rather than a wait.
type secretReader struct {
	w         *secretWatch
	namespace string
}

// syncWait bounds how long a read waits for a new watch to sync before it
// asks the API server itself.
const syncWait = 2 * time.Second

// SecretValue implements connection.SecretReader. Errors name the Secret and
// the key, never a value.
func (r *secretReader) SecretValue(ctx context.Context, name, key string) (string, error) {
	secret := origin(r.namespace, name)
	obj, state := r.w.cached(r.namespace, name)
	if state == "syncing" || state == "unwatched" {
		wctx, cancel := context.WithTimeout(ctx, syncWait)
		for state == "syncing" && wctx.Err() == nil {
			select {
			case <-wctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			obj, state = r.w.cached(r.namespace, name)
		}
		cancel()
	}
	if state != "present" && state != "absent" {
		got, err := r.w.client.Resource(secretsResource).Namespace(r.namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			state = "absent"
		case err != nil:
			// The API server's message names the Secret and the reason
			// (forbidden, unreachable), never its data.
			return "", fmt.Errorf("reading Secret %s: %w", secret, err)
		default:
			obj = got
		}
	}
	if state == "absent" || obj == nil {
		return "", fmt.Errorf("the Secret %s does not exist", secret)
	}
	enc, ok, _ := unstructured.NestedString(obj.Object, "data", key)
	if !ok {
		return "", fmt.Errorf("the Secret %s has no key %s", secret, key)
	}
	val, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("the key %s of the Secret %s is not base64", key, secret)
	}
	if len(val) == 0 {
		return "", fmt.Errorf("the key %s of the Secret %s is empty", key, secret)
	}
	return string(val), nil
}
