//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/tether-mcp/tether/spec"
)

// statusState is what the harness reads from one status file: the first
// document's phase, observed spec hash and child pid, and when the harness
// saw that content.
type statusState struct {
	Phase spec.Phase
	Hash  string
	PID   int
	Seen  time.Time
}

// parseStatus reads phase, observedSpecHash and process.pid of the first
// document of a status file. It scans lines instead of decoding YAML: at a
// thousand connections the harness reads thousands of status writes on the
// same two cores tether runs on, and a YAML decoder per write would take CPU
// from the process being measured. TestParseStatus holds it to a file the
// status writer wrote, and to the generic rendering of the same fields.
func parseStatus(data []byte) statusState {
	var st statusState
	inProcess := false
	for line := range bytes.Lines(data) {
		line = bytes.TrimRight(line, "\r\n")
		if bytes.Equal(line, []byte("---")) {
			break // first document only
		}
		switch {
		case bytes.HasPrefix(line, []byte("  phase: ")):
			st.Phase = spec.Phase(unquote(line[len("  phase: "):]))
		case bytes.HasPrefix(line, []byte("  observedSpecHash: ")):
			st.Hash = unquote(line[len("  observedSpecHash: "):])
		case bytes.HasPrefix(line, []byte("  process:")):
			inProcess = true
		case inProcess && bytes.HasPrefix(line, []byte("    pid: ")):
			st.PID, _ = strconv.Atoi(unquote(line[len("    pid: "):]))
		case !bytes.HasPrefix(line, []byte("    ")):
			inProcess = false
		}
	}
	return st
}

func unquote(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		s = s[1 : len(s)-1]
	}
	return s
}

// statusPath is where tether writes the status of a manifest (no
// --status-dir).
func statusPath(manifest string) string {
	return strings.TrimSuffix(manifest, ".yaml") + ".status.yaml"
}

// statusWatch follows the status files of one flat directory through
// inotify, so that waiting for a thousand files costs the harness a read per
// write tether makes instead of a read per file per poll.
type statusWatch struct {
	dir string
	w   *fsnotify.Watcher

	mu      sync.Mutex
	states  map[string]statusState // status path → last content seen
	changes int                    // status contents seen, across all files
	changed chan struct{}          // closed and replaced on every update
	done    chan struct{}          // closed when run returns
}

func newStatusWatch(dir string) (*statusWatch, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, err
	}
	sw := &statusWatch{
		dir:     dir,
		w:       w,
		states:  map[string]statusState{},
		changed: make(chan struct{}),
		done:    make(chan struct{}),
	}
	go sw.run()
	sw.rescan() // files written before the watch began
	return sw, nil
}

// Close stops the watch and waits for its goroutine.
func (sw *statusWatch) Close() {
	sw.w.Close()
	<-sw.done
}

func (sw *statusWatch) run() {
	defer close(sw.done)
	for {
		select {
		case ev, ok := <-sw.w.Events:
			if !ok {
				return
			}
			if !strings.HasSuffix(ev.Name, ".status.yaml") {
				continue
			}
			if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
				sw.update(ev.Name, nil)
				continue
			}
			sw.read(ev.Name)
		case err, ok := <-sw.w.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				sw.rescan()
			}
		}
	}
}

func (sw *statusWatch) read(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		sw.update(path, nil)
		return
	}
	st := parseStatus(data)
	sw.update(path, &st)
}

func (sw *statusWatch) rescan() {
	ents, err := os.ReadDir(sw.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".status.yaml") {
			sw.read(filepath.Join(sw.dir, e.Name()))
		}
	}
}

func (sw *statusWatch) update(path string, st *statusState) {
	now := time.Now()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	old, had := sw.states[path]
	switch {
	case st == nil && !had:
		return
	case st == nil:
		delete(sw.states, path)
	default:
		if had && old.Phase == st.Phase && old.Hash == st.Hash && old.PID == st.PID {
			return // same content: keep the time it first appeared
		}
		st.Seen = now
		sw.states[path] = *st
		sw.changes++
	}
	close(sw.changed)
	sw.changed = make(chan struct{})
}

// changesSeen counts the distinct status contents seen so far: about the
// number of status writes tether made (a write that changes none of phase,
// hash and pid is not counted, and writes in quick succession may be seen
// as one).
func (sw *statusWatch) changesSeen() int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.changes
}

// get returns the last state seen for a status path.
func (sw *statusWatch) get(path string) (statusState, bool) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	st, ok := sw.states[path]
	return st, ok
}

// phases counts the phases of the given status paths (for error messages).
func (sw *statusWatch) phases(paths []string) map[spec.Phase]int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	out := map[spec.Phase]int{}
	for _, p := range paths {
		out[sw.states[p].Phase]++
	}
	return out
}

// wait blocks until ok holds for the state of every path, and returns the
// latest time at which one of those states was first seen: the moment the
// last of them became true, independent of when this goroutine woke up.
func (sw *statusWatch) wait(ctx context.Context, paths []string, ok func(statusState) bool) (time.Time, error) {
	pending := maps.Collect(func(yield func(string, bool) bool) {
		for _, p := range paths {
			if !yield(p, true) {
				return
			}
		}
	})
	var last time.Time
	// A missed event must not hang the run: re-read what is still pending
	// now and then, as tether's own resync does.
	rescan := time.NewTicker(time.Second)
	defer rescan.Stop()
	for {
		sw.mu.Lock()
		for p := range pending {
			if st, found := sw.states[p]; found && ok(st) {
				if st.Seen.After(last) {
					last = st.Seen
				}
				delete(pending, p)
			}
		}
		if len(pending) == 0 {
			// Done only if every state still holds (one may have flapped
			// since it was first seen); else wait for those again.
			last = time.Time{}
			for _, p := range paths {
				st := sw.states[p]
				if !ok(st) {
					pending[p] = true
				} else if st.Seen.After(last) {
					last = st.Seen
				}
			}
		}
		changed := sw.changed
		sw.mu.Unlock()
		if len(pending) == 0 {
			return last, nil
		}
		select {
		case <-changed:
		case <-rescan.C:
			for p := range pending {
				sw.read(p)
			}
		case <-ctx.Done():
			left := make([]string, 0, len(pending))
			for p := range pending {
				left = append(left, p)
			}
			return last, fmt.Errorf("%d of %d status files not there in time: phases %v; e.g. %s",
				len(left), len(paths), sw.phases(left), filepath.Base(left[0]))
		}
	}
}

func isConnected(st statusState) bool { return st.Phase == spec.PhaseConnected }

// isIdle: an OnDemand server stopped while idle (no child pid shown).
func isIdle(st statusState) bool { return st.Phase == spec.PhaseIdle && st.PID == 0 }
