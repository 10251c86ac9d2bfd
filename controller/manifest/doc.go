// Package manifest is the manifest tree: which files under a directory are
// manifests (ListTree, .tetherignore, status-file names and the x.yaml/x.yml
// clash), bounded decoding (Decode, through controller/boundedfile), the
// rules that turn one listing into desired state (Resolve: the last valid
// spec, duplicate names), and Source, the fsnotify watcher that keeps a
// desired.Store in line with the tree. tether run, validate, get and import
// share it, so that each rule lives in one place.
//
// It reads files and never writes one. It does not reconcile or write status
// (the controller and controller/statusfile do), and it decodes only through
// package spec.
package manifest
