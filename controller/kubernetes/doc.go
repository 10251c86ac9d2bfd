// Package kubernetes is tether's Kubernetes mode: the second Source and the
// second StatusSink of package controller. McpConnection objects
// (tether.dev/v1alpha1, namespaced) come in through a client-go informer on
// the dynamic client and are decoded and validated by the same code as a
// manifest file (spec.DecodeFile); status goes to each object's status
// subresource, written by the replica that holds a coordination.k8s.io Lease,
// with Kubernetes Events on its transitions. The Secrets that
// valueFrom.secretKeyRef names are watched one by one, so that a rotation
// reconnects.
//
// It owns the informers, the Secret watches, the leader election and the
// status writes. It does not reconcile, connect or serve anything: the
// reconciler, supervisor, gateway and metrics are the same as with a
// manifest directory.
//
// Names: watching one namespace (--namespace), a connection is named after
// its object (metadata.name); watching all namespaces, it is
// <namespace>.<name>, which is unambiguous because a namespace has no dot.
// That name keys metrics, logs and collisions; the gateway's tool prefix
// still defaults to metadata.name.
package kubernetes
