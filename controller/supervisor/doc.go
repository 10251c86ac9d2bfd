// Package supervisor keeps one MCP connection alive: it owns the connect
// attempt, the backoff between attempts, the health probes and the live
// session of that one connection, behind a lock of its own. The reconciler
// (package controller) tells it what is wanted (Step, Suspend, Stop, Close)
// and reads an immutable Snapshot back; it never reaches into its fields.
// Where a connection is (Idle, Connecting, Connected, Backoff, Dormant, …)
// is one State, moved only along the Transitions table (state.go).
//
// A Supervisor never blocks its caller on the network: attempts, probes and
// closes run in goroutines it owns (Wait waits for them), and each reports
// back by asking for a reconcile (Options.Notify). It never calls another
// component while it holds its lock: what it must tell others (an attempt's
// outcome for the metrics, a dropped session for the gateway) is collected
// under the lock and told after it is released.
//
// It does not know where specs come from, nor where status goes, nor what the
// gateway does with a session.
package supervisor
