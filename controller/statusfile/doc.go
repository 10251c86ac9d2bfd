// Package statusfile owns status files: where a manifest's status goes
// (Path: beside it, or mirrored under --status-dir), how a document is
// rendered (fields in the documented order), the atomic write (temp file and
// rename, only when the bytes change), reading one back (Read) and removing
// those of manifests that are gone (Writer.Prune). Its Writer is the
// StatusSink of tether run; tether get reads through Read.
//
// It writes what it is given: status is computed by the controller
// (ComputeStatus), never here.
package statusfile
