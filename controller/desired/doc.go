// Package desired is the store of desired state: the last valid spec of
// every connection and the manifest error in force for it. A Source (the
// manifest tree's watcher, or the Kubernetes informer) is its only writer;
// the reconciler reads it. It does no I/O and knows neither files nor
// objects: an Entry's Origin is opaque here and meaningful to the Source that
// set it and the status sink that reports on it.
package desired
