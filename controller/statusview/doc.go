// Package statusview shows connections the way `tether get` prints them: it
// reads the manifests of a tree and the status files tether writes beside
// them (or under --status-dir), joins them by connection name, selects by
// name and label, renders kubectl-like tables and Lists, and watches the
// status files for changes.
//
// It only reads. It never talks to a running tether and never writes a
// file: the status files are the interface, so everything here works
// whether or not tether runs. What it prints comes from the status files
// (which hold no secrets by construction) and from a manifest's command,
// arguments and URL, never from env or header values.
package statusview
