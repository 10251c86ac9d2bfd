// Package controller is tether's hub: it keeps MCP connections in the state a
// Source declares. Controller runs the Source, a rate-limited workqueue of
// connection names and the workers; Reconciler.Reconcile reads a connection's
// desired entry (controller/desired) and its supervisor's snapshot
// (controller/supervisor), tells the supervisor what is wanted, hands a live
// session to the gateway through an Exposer, computes the status with
// ComputeStatus (a pure function) and hands it to a StatusSink.
//
// It knows neither files nor fsnotify: the manifest tree's watcher
// (controller/manifest) and the status-file writer (controller/statusfile)
// are the Source and StatusSink of tether run. It does not decode manifests
// (package spec), speak MCP (controller/connection) or serve it
// (controller/gateway), and it holds no lock while it calls another
// component (docs/architecture.md §4).
package controller
