package controller

import (
	"context"
	"time"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/gateway"
	"github.com/tether-mcp/tether/spec"
)

// Source is where desired state comes from: the manifest tree's watcher
// (controller/manifest) or, in Kubernetes mode, an informer. It is the only
// writer of the desired-state store it was made with.
type Source interface {
	// Run fills the store, then keeps it current until ctx is done. It
	// calls changed with the names whose entry changed (and with every name
	// on a periodic resync), and synced once, after the first complete
	// listing is in the store.
	Run(ctx context.Context, changed func(names []string), synced func()) error
}

// StatusSink is where status goes: status files beside the manifests
// (controller/statusfile) or, in Kubernetes mode, the objects' status
// subresource. Each method is called for one connection at a time.
type StatusSink interface {
	// Previous returns the status a previous run left for e, if any, so
	// that transition times and counters carry on.
	Previous(e desired.Entry) (spec.ConnectionStatus, bool)
	// Put records e's status. A sink writes only when it changed.
	Put(e desired.Entry, st spec.ConnectionStatus) error
	// Delete removes the status of a connection that is gone.
	Delete(name string) error
}

// Exposed is a connected connection as the gateway serves it.
type Exposed struct {
	Name        string
	Prefix      string
	Filter      *spec.ToolFilter
	CallTimeout time.Duration
	// Backend is what the gateway calls: the live session, or an OnDemand
	// connection's backend; the gateway reads what it offers from it.
	Backend gateway.Backend
}

// Exposer is the gateway as the reconciler drives it.
type Exposer interface {
	Set(e Exposed)
	// SetUnavailable: the connection is declared but not served; its
	// names stay its own (docs/contract.md §5) as far as prefix and filter,
	// its spec's, still expose them.
	SetUnavailable(name, prefix string, filter *spec.ToolFilter, reason string)
	Remove(name string)
	// Exposure is what the gateway serves of the connection now.
	Exposure(name string) gateway.Exposure
}

// Metrics is what the reconciler reports; controller/metrics implements it.
type Metrics interface {
	ConnectionAdded(name string)
	ConnectionRemoved(name string)
	SetPhase(name string, phase spec.Phase)
	SetTools(name string, exposed int)
	SetCollisions(name string, n int)
	ObserveAttempt(name string, success bool)
	ObserveHealthCheck(name string, d time.Duration)
	SetManifestErrors(file string, n int)
	ObserveReconcile(result string, d time.Duration)
	// ObserveCatalogChange counts the definitions a server's catalog
	// gained and lost.
	ObserveCatalogChange(name string, added, removed int)
}

type noopMetrics struct{}

func (noopMetrics) ConnectionAdded(string)                   {}
func (noopMetrics) ConnectionRemoved(string)                 {}
func (noopMetrics) SetPhase(string, spec.Phase)              {}
func (noopMetrics) SetTools(string, int)                     {}
func (noopMetrics) SetCollisions(string, int)                {}
func (noopMetrics) ObserveAttempt(string, bool)              {}
func (noopMetrics) ObserveHealthCheck(string, time.Duration) {}
func (noopMetrics) SetManifestErrors(string, int)            {}
func (noopMetrics) ObserveReconcile(string, time.Duration)   {}
func (noopMetrics) ObserveCatalogChange(string, int, int)    {}
