package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/controller/desired"
)

// SourceOptions configures a Source.
type SourceOptions struct {
	Client dynamic.Interface
	// Namespace is the namespace watched; "" watches all of them.
	Namespace string
	// LabelSelector keeps only the objects whose labels it selects
	// (kubectl's -l syntax); "" keeps all.
	LabelSelector string
	// Resync re-delivers every object and re-enqueues its connection
	// (default 5m).
	Resync time.Duration
	Logger *slog.Logger
	// ManifestErrors is told, per object (namespace/name), how many problems
	// it has when that changes (0 once fixed or deleted): the
	// tether_manifest_errors gauge.
	ManifestErrors func(object string, n int)
}

// Source keeps a desired.Store in line with the McpConnection objects that
// an informer on the dynamic client delivers. It is the store's only writer.
// An object the API server accepted but tether rejects keeps its
// connection's last valid spec, with the error (phase Invalid when there was
// none), as a manifest file does.
type Source struct {
	opts    SourceOptions
	log     *slog.Logger
	desired *desired.Store
	secrets *secretWatch

	informer cache.SharedIndexInformer

	// mu serialises the store's updates: the object handler and the Secret
	// watches both compute an entry from what they see and put it.
	mu      sync.Mutex
	changed func(names []string)
	errs    map[string]string // object → its problems, while it has some
}

// NewSource returns a source that writes into store.
func NewSource(opts SourceOptions, store *desired.Store) *Source {
	if opts.Resync <= 0 {
		opts.Resync = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Source{opts: opts, log: opts.Logger, desired: store, errs: map[string]string{}, changed: func([]string) {}}
	s.secrets = newSecretWatch(opts.Client, opts.Logger, s.secretsChanged)
	s.informer = newInformer(opts.Client, Resource, opts.Namespace, opts.Resync,
		func(o *metav1.ListOptions) { o.LabelSelector = opts.LabelSelector })
	return s
}

// Run implements the controller's Source: it starts the informer, calls
// synced once the first listing has gone through the handler, and keeps the
// store current until ctx is done. The informer lists and watches again by
// itself after the API server was away.
func (s *Source) Run(ctx context.Context, changed func(names []string), synced func()) error {
	if changed != nil {
		s.mu.Lock()
		s.changed = changed
		s.mu.Unlock()
	}
	reg, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { s.apply(o, false) },
		UpdateFunc: func(old, o any) {
			// The same resourceVersion is the informer's periodic resync:
			// look at the connection again even though nothing changed.
			resync := false
			if a, ok := old.(*unstructured.Unstructured); ok {
				if b, ok := o.(*unstructured.Unstructured); ok {
					resync = a.GetResourceVersion() == b.GetResourceVersion()
				}
			}
			s.apply(o, resync)
		},
		DeleteFunc: s.remove,
	})
	if err != nil {
		return fmt.Errorf("watching McpConnections: %w", err)
	}
	_ = s.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if apierrors.IsNotFound(err) {
			s.log.Warn("the API server does not serve McpConnections: is the CRD installed? (tether crd | kubectl apply -f -); retrying",
				"namespace", s.namespaceDesc(), "err", err)
			return
		}
		s.log.Warn("watching McpConnections failed; retrying", "namespace", s.namespaceDesc(), "err", err)
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.informer.RunWithContext(ctx)
	}()
	defer func() {
		wg.Wait()
		s.secrets.stop()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil // ctx ended first
	}
	s.log.Info("McpConnections listed", "namespace", s.namespaceDesc(), "connections", len(s.desired.Names()))
	if synced != nil {
		synced()
	}
	<-ctx.Done()
	return nil
}

func (s *Source) namespaceDesc() string {
	if s.opts.Namespace == "" {
		return "(all)"
	}
	return s.opts.Namespace
}

// Object returns the object of an entry (its Origin, namespace/name) as the
// informer's cache holds it. The caller must not change it.
func (s *Source) Object(origin string) (*unstructured.Unstructured, bool) {
	o, ok, err := s.informer.GetStore().GetByKey(origin)
	if err != nil || !ok {
		return nil, false
	}
	u, ok := o.(*unstructured.Unstructured)
	return u, ok
}

// SecretsFor returns what reads valueFrom.secretKeyRef for a connection: the
// Secrets of its object's namespace. It fits controller.SDKConnector.Secrets.
func (s *Source) SecretsFor(conn string) connection.SecretReader {
	e, ok := s.desired.Get(conn)
	if !ok {
		return nil
	}
	ns, _, _ := strings.Cut(e.Origin, "/")
	return s.secrets.reader(ns)
}

// apply puts the entry that obj declares into the store.
func (s *Source) apply(o any, resync bool) {
	obj, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	ns, name := obj.GetNamespace(), obj.GetName()
	conn := ConnectionName(s.opts.Namespace, ns, name)
	org := origin(ns, name)

	decoded, problem := decodeObject(obj)
	if decoded != nil {
		// Before the lock: a new Secret's first listing is a round trip.
		refs := decoded.Spec.SecretKeyRefs()
		s.secrets.track(conn, ns, refs)
		s.secrets.waitSynced(ns, refs, syncWait)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	prev, had := s.desired.Get(conn)
	e := desired.Entry{Name: conn, Origin: org, Generation: obj.GetGeneration()}
	if decoded != nil {
		if had {
			decoded = desired.Keep(prev.Conn, decoded)
		}
		e.Conn = decoded
	} else {
		if had && prev.Origin == org {
			e.Conn = prev.Conn // the last valid spec stays in force
		}
		e.ManifestError = problem
	}
	s.putLocked(e, ns)
	s.reportLocked(org, problem)
	if resync {
		s.changed([]string{conn})
	}
}

// putLocked tracks the Secrets that e's spec reads, stamps their version and
// puts e, telling the controller when it changed.
func (s *Source) putLocked(e desired.Entry, namespace string) {
	if e.Conn != nil {
		refs := e.Conn.Spec.SecretKeyRefs()
		s.secrets.track(e.Name, namespace, refs)
		e.SecretsVersion = s.secrets.version(namespace, refs)
	} else {
		s.secrets.track(e.Name, namespace, nil)
	}
	if s.desired.Put(e) {
		s.changed([]string{e.Name})
	}
}

// reportLocked logs an object's problems when they change, and sets the
// manifest-errors gauge.
func (s *Source) reportLocked(org, problem string) {
	was := s.errs[org]
	switch {
	case problem == was:
		return
	case problem != "":
		s.errs[org] = problem
		s.log.Error("invalid McpConnection", "object", org, "err", problem)
	default:
		delete(s.errs, org)
		s.log.Info("McpConnection is valid again", "object", org)
	}
	if s.opts.ManifestErrors != nil && (was == "") != (problem == "") {
		n := 0
		if problem != "" {
			n = 1
		}
		s.opts.ManifestErrors(org, n)
	}
}

// remove drops the entry of a deleted object (or one that no longer matches
// the label selector).
func (s *Source) remove(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	obj, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	ns, name := obj.GetNamespace(), obj.GetName()
	conn := ConnectionName(s.opts.Namespace, ns, name)
	org := origin(ns, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets.track(conn, ns, nil)
	if _, bad := s.errs[org]; bad {
		delete(s.errs, org)
		if s.opts.ManifestErrors != nil {
			s.opts.ManifestErrors(org, 0)
		}
	}
	if e, ok := s.desired.Get(conn); ok && e.Origin == org && s.desired.Delete(conn) {
		s.changed([]string{conn})
	}
}

// secretsChanged stamps the connections that read a Secret that changed
// with the new version; those whose version moved reconnect.
func (s *Source) secretsChanged(conns []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range conns {
		e, ok := s.desired.Get(c)
		if !ok || e.Conn == nil {
			continue
		}
		ns, _, _ := strings.Cut(e.Origin, "/")
		e.SecretsVersion = s.secrets.version(ns, e.Conn.Spec.SecretKeyRefs())
		if s.desired.Put(e) {
			s.log.Info("a Secret the connection reads changed", "connection", c)
			s.changed([]string{c})
		}
	}
}
