//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/tether-mcp/tether/controller/statusfile"
	"github.com/tether-mcp/tether/spec"
)

// TestHostileStatusWriteAmplification: one manifest of 60 stdio
// connections whose servers print 30 KB on stderr and crash (docs/
// reliability.md, row HP1). Their status file is written at most once per
// --status-write-interval (renames counted with inotify over a window),
// stays within the size status files are read with, and `tether get` shows
// the connections' real phases. Before, the file grew to 1.5 MB and was
// rewritten at 50 MB/s, and get, unable to read it, showed them Pending.
func TestHostileStatusWriteAmplification(t *testing.T) {
	const (
		conns    = 60
		interval = 250 * time.Millisecond
		window   = 4 * time.Second
	)
	dir := t.TempDir()
	m := filepath.Join(dir, "flap.yaml")
	var docs []string
	for i := range conns {
		docs = append(docs, faultManifest(t, fmt.Sprintf("flap%02d", i),
			[]string{"-stderr-bytes", "30000", "-init-delay", "10s", "-exit-after", "50ms", "-exit-code", "3"},
			"  backoff: {initial: 100ms, max: 1s}\n"))
	}
	writeFile(t, m, strings.Join(docs, "---\n"))
	statusPath := filepath.Join(dir, "flap.status.yaml")

	tt := startTether(t, dir, "--status-write-interval", interval.String())
	// Every connection has failed at least once and shows its stderr.
	waitStatus(t, m, fmt.Sprintf("flap%02d", conns-1), 60*time.Second, "a crash with its stderr", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseReconnecting && st.Process != nil && len(st.Process.StderrTail) > 0
	})

	// Count the status file's writes (each one a rename onto it) while the
	// connections keep crashing. The watch starts now: events queued
	// earlier would count writes from before the window.
	watcher, err := fsnotify.NewWatcher()
	must(t, err)
	defer watcher.Close()
	must(t, watcher.Add(dir))
	writes := 0
	end := time.After(window)
count:
	for {
		select {
		case ev := <-watcher.Events:
			if ev.Name == statusPath && ev.Has(fsnotify.Create) {
				writes++
			}
		case err := <-watcher.Errors:
			t.Fatalf("watching the status file: %v", err)
		case <-end:
			break count
		}
	}
	restarts := 0
	for i := range conns {
		if st, ok := readStatus(t, m, fmt.Sprintf("flap%02d", i)); ok && st.Process != nil {
			restarts += st.Process.Restarts
		}
	}
	// One write per interval, plus the burst the writer lets go at once
	// (tokens saved before the window), plus one for a window that does
	// not start on an interval's edge.
	bound := int(window/interval) + statusfile.DefaultWriteBurst + 1
	t.Logf("%d writes of the status file in %v (bound %d); %d restarts in all", writes, window, bound, restarts)
	if writes > bound {
		t.Errorf("the status file was written %d times in %v, over the bound of %d (one per %v)", writes, window, bound, interval)
	}
	if writes == 0 {
		t.Errorf("the status file was not written at all in %v while its connections crashed", window)
	}
	fi, err := os.Stat(statusPath)
	must(t, err)
	if fi.Size() > spec.MaxFileSize {
		t.Errorf("the status file is %d bytes, over the %d tether get reads", fi.Size(), spec.MaxFileSize)
	}

	// tether get reads it: every connection with its real phase.
	out, err := exec.Command(filepath.Join(builtBinaries(t), "tether"), "get", "--dir", dir, "-o", "json").Output()
	if err != nil {
		t.Fatalf("tether get: %v\n%s", err, out)
	}
	var list struct{ Items []spec.StatusDocument }
	must(t, json.Unmarshal(out, &list))
	if len(list.Items) != conns {
		t.Fatalf("tether get shows %d connections, want %d", len(list.Items), conns)
	}
	for _, doc := range list.Items {
		if p := doc.Status.Phase; p != spec.PhaseReconnecting && p != spec.PhaseConnecting {
			t.Errorf("tether get shows %s as %s, want Reconnecting or Connecting (a server that crashes)", doc.Metadata.Name, p)
		}
	}
	tt.stop()
}
