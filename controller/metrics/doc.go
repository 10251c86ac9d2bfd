// Package metrics owns tether's Prometheus instrumentation and its admin
// endpoints (docs/contract.md §4): a private registry holding every tether_* metric,
// the client-go workqueue metrics under controller-runtime's names, the Go
// and process collectors, and the HTTP handler serving /metrics, /healthz and
// /readyz.
//
// It keeps label values bounded: a connection's series exist from
// ConnectionAdded to ConnectionRemoved and nowhere else, state and result
// labels only take the values listed in docs/contract.md §4, and a file label appears
// only on tether_manifest_errors while that file is invalid. It must not
// reach into the reconciler or the gateway: they call it, never the reverse,
// and it never sees a secret (no label carries a manifest value).
package metrics
