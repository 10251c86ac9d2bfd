//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/statusfile"
	"github.com/tether-mcp/tether/spec"
)

// fullStatus is a status document with every field a Connected stdio
// connection shows.
func fullStatus() spec.StatusDocument {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	exit := 1
	cond := func(typ, status, reason, msg string) spec.Condition {
		return spec.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: at}
	}
	return spec.StatusDocument{
		APIVersion: "tether.dev/v1alpha1",
		Kind:       "McpConnection",
		Metadata:   spec.ObjectMeta{Name: "github"},
		Status: spec.ConnectionStatus{
			Phase:            spec.PhaseConnected,
			ObservedSpecHash: "sha256:6f1ed002ab5595859014ebf0951522d9a3e1a3d0a2b3c4d5e6f708192a3b4c5d",
			Conditions: []spec.Condition{
				cond(spec.ConditionReady, spec.ConditionTrue, "Connected", "connected to github-mcp-server 1.2.0, 47 tools"),
				cond(spec.ConditionReconciling, spec.ConditionFalse, "Succeeded", ""),
				cond(spec.ConditionStalled, spec.ConditionFalse, "Succeeded", ""),
			},
			Server:         &spec.ServerInfo{Name: "github-mcp-server", Version: "1.2.0", ProtocolVersion: "2025-06-18"},
			Tools:          &spec.Counts{Count: 47, Exposed: 40},
			ConnectedSince: &at,
			Process: &spec.ProcessStatus{PID: 4242, Restarts: 3, LastExitCode: &exit,
				StderrTail: []string{"listening on stdio", "warming cache", "ready"}},
		},
	}
}

// BenchmarkStatusPut is the status writer's whole path for one connection:
// render, compare with what is on disk, and write only on a change.
// "unchanged" is what every reconcile of a steady connection costs;
// "changed" adds the atomic write (temp file, rename) on the machine's disk.
func BenchmarkStatusPut(b *testing.B) {
	for _, bc := range []struct {
		name   string
		change bool
	}{{"unchanged", false}, {"changed", true}} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			manifest := filepath.Join(dir, "github.yaml")
			doc := fullStatus()
			order := []string{doc.Metadata.Name}
			w := statusfile.NewWriter(dir, "", func(string) []string { return order })
			e := desired.Entry{Name: doc.Metadata.Name, Origin: manifest}
			if err := w.Put(e, doc.Status); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if bc.change {
					doc.Status.Attempt++
				}
				if err := w.Put(e, doc.Status); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestParseStatus holds the harness's line scanner to what tether writes:
// a wrong reading would make every figure of the harness wrong.
func TestParseStatus(t *testing.T) {
	doc := fullStatus()
	second := fullStatus()
	second.Metadata.Name = "second"
	second.Status.Phase = spec.PhaseReconnecting
	second.Status.ObservedSpecHash = "sha256:other"
	second.Status.Process.PID = 7

	dir := t.TempDir()
	manifest := filepath.Join(dir, "github.yaml")
	w := statusfile.NewWriter(dir, "", func(string) []string { return []string{"github", "second"} })
	if err := w.Put(desired.Entry{Name: "github", Origin: manifest}, doc.Status); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(desired.Entry{Name: "second", Origin: manifest, Index: 1}, second.Status); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(statusPath(manifest))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "\n---\n") {
		t.Fatalf("expected two documents, got:\n%s", data)
	}
	noProcess := fullStatus()
	noProcess.Status.Process = nil
	noProcess.Status.Phase = spec.PhasePending
	rendered, err := spec.RenderYAML(noProcess)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want statusState
	}{
		{"first of two documents", data, statusState{Phase: spec.PhaseConnected, Hash: doc.Status.ObservedSpecHash, PID: 4242}},
		{"no process", rendered, statusState{Phase: spec.PhasePending, Hash: doc.Status.ObservedSpecHash}},
		{"empty", nil, statusState{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseStatus(tc.data); got != tc.want {
				t.Errorf("parseStatus = %+v, want %+v; input:\n%s", got, tc.want, tc.data)
			}
		})
	}
}
