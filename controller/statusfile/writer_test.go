package statusfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/spec"
)

// writerFor returns a writer for one manifest m.yaml in a fresh directory
// that declares names, and the manifest's path.
func writerFor(t *testing.T, names []string) (*Writer, string) {
	t.Helper()
	dir := t.TempDir()
	m := filepath.Join(dir, "m.yaml")
	return NewWriter(dir, "", func(string) []string { return names }), m
}

func attemptStatus(n int) spec.ConnectionStatus {
	return spec.ConnectionStatus{Phase: spec.PhaseReconnecting, Attempt: n, Conditions: []spec.Condition{}}
}

// attemptOnDisk returns the attempt of name in the status file at path.
func attemptOnDisk(t *testing.T, path, name string) (int, bool) {
	t.Helper()
	docs, err := Read(path)
	if err != nil {
		return 0, false
	}
	d, ok := docs[name]
	return d.Status.Attempt, ok
}

// TestWriterPacesWrites: within the write interval a status file is
// written once, however often its content changes; Close writes the last
// content at once.
func TestWriterPacesWrites(t *testing.T) {
	w, m := writerFor(t, []string{"flap"})
	w.SetWriteInterval(time.Hour)
	e := desired.Entry{Name: "flap", Origin: m}
	for i := range 100 {
		if err := w.Put(e, attemptStatus(i)); err != nil {
			t.Fatal(err)
		}
	}
	path := w.Path(m)
	if n, _ := attemptOnDisk(t, path, "flap"); n != 0 {
		t.Fatalf("within the interval the file was rewritten: attempt %d on disk, want the first write's 0", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n, ok := attemptOnDisk(t, path, "flap"); !ok || n != 99 {
		t.Fatalf("after Close: attempt %d (found %v), want the last state, 99", n, ok)
	}
	// Closed: a change goes to disk at once.
	if err := w.Put(e, attemptStatus(100)); err != nil {
		t.Fatal(err)
	}
	if n, _ := attemptOnDisk(t, path, "flap"); n != 100 {
		t.Fatalf("after Close a Put was not written at once: attempt %d", n)
	}
}

// TestWriterBurst: with a burst of n, the first n changes of a file land
// at once (a reconnect is seen as it happens), the next waits for the
// interval; Close writes it.
func TestWriterBurst(t *testing.T) {
	for _, burst := range []int{1, 2, 4} {
		t.Run(fmt.Sprint(burst), func(t *testing.T) {
			w, m := writerFor(t, []string{"flap"})
			w.SetWriteInterval(time.Hour)
			w.SetWriteBurst(burst)
			e := desired.Entry{Name: "flap", Origin: m}
			path := w.Path(m)
			for i := range burst {
				if err := w.Put(e, attemptStatus(i)); err != nil {
					t.Fatal(err)
				}
				if n, _ := attemptOnDisk(t, path, "flap"); n != i {
					t.Fatalf("write %d of a burst of %d was put off: attempt %d on disk", i+1, burst, n)
				}
			}
			if err := w.Put(e, attemptStatus(burst)); err != nil {
				t.Fatal(err)
			}
			if n, _ := attemptOnDisk(t, path, "flap"); n != burst-1 {
				t.Fatalf("the write after a burst of %d landed at once: attempt %d on disk, want %d", burst, n, burst-1)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if n, _ := attemptOnDisk(t, path, "flap"); n != burst {
				t.Fatalf("after Close: attempt %d, want %d", n, burst)
			}
		})
	}
}

// TestWriterWritesLastStateWhenIntervalEnds: a change put off by the
// interval lands once it has passed, with the last content, without
// another Put.
func TestWriterWritesLastStateWhenIntervalEnds(t *testing.T) {
	w, m := writerFor(t, []string{"a", "b"})
	w.SetWriteInterval(20 * time.Millisecond)
	for i := range 50 {
		for _, name := range []string{"a", "b"} {
			if err := w.Put(desired.Entry{Name: name, Origin: m}, attemptStatus(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		na, _ := attemptOnDisk(t, w.Path(m), "a")
		nb, _ := attemptOnDisk(t, w.Path(m), "b")
		if na == 49 && nb == 49 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last state never reached the file: attempts a=%d b=%d, want 49", na, nb)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() { _ = w.Close() })
}

// TestWriterPutOffDeleteLands: a removal put off by the interval removes
// the file once it has passed.
func TestWriterPutOffDeleteLands(t *testing.T) {
	names := []string{"gone"}
	w, m := writerFor(t, names)
	w.SetWriteInterval(time.Hour)
	if err := w.Put(desired.Entry{Name: "gone", Origin: m}, attemptStatus(1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Delete("gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.Path(m)); err != nil {
		t.Fatalf("the file went within the interval: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.Path(m)); !os.IsNotExist(err) {
		t.Fatalf("after Close the status file of a deleted connection is still there: %v", err)
	}
}

// hugeStatus is a status with every part that can be long filled, in
// characters that render escaped (six bytes each), and stderrTail as long
// as tether lets it be (20 lines of 1 KiB). What its smallest form keeps
// (name, times, counts, hash) is as long as it can be.
func hugeStatus(phase spec.Phase) spec.ConnectionStatus {
	long := strings.Repeat("\x01", 64)
	var tail, names []string
	for range 20 {
		tail = append(tail, strings.Repeat("x", 1024))
		names = append(names, long)
	}
	var coll []spec.ToolCollision
	for range 20 {
		coll = append(coll, spec.ToolCollision{Tool: long, Connection: long})
	}
	now := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	code := -2147483648
	return spec.ConnectionStatus{
		Phase:            phase,
		ObservedSpecHash: "sha256:" + strings.Repeat("f", 64),
		Conditions: []spec.Condition{
			{Type: spec.ConditionReady, Status: "False", Reason: "HealthCheckFailing", Message: long, LastTransitionTime: now},
			{Type: spec.ConditionReconciling, Status: "False", Reason: "HealthCheckFailing", Message: long, LastTransitionTime: now},
			{Type: spec.ConditionStalled, Status: "False", Reason: "HealthCheckFailing", Message: long, LastTransitionTime: now},
		},
		Server:            &spec.ServerInfo{Name: long, Version: long, ProtocolVersion: long},
		Tools:             &spec.Counts{Count: 1 << 30, Exposed: 1 << 30},
		Prompts:           &spec.Counts{Count: 1 << 30, Exposed: 1 << 30},
		Resources:         &spec.Counts{Count: 1 << 30, Exposed: 1 << 30},
		ResourceTemplates: &spec.Counts{Count: 1 << 30, Exposed: 1 << 30},
		Catalog:           &spec.CatalogStatus{Hash: "sha256:" + strings.Repeat("e", 64), ChangedTime: &now, Added: names, Removed: names},
		Attempt:           1 << 30,
		LastError:         long,
		NextRetryTime:     &now,
		ConnectedSince:    &now,
		Process:           &spec.ProcessStatus{PID: 1 << 22, Restarts: 1 << 30, LastExitCode: &code, StderrTail: tail},
		ManifestError:     long,
		Collisions:        coll,
	}
}

// TestFitWorstCase: a manifest of spec.MaxDocuments connections, each with
// the longest name and the largest status, still gets a status file that
// Read (tether get's cap) reads back whole, with every phase.
func TestFitWorstCase(t *testing.T) {
	floor := (MaxFileSize - len(separator)*(spec.MaxDocuments-1)) / spec.MaxDocuments
	d := newDocument(spec.StatusDocument{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.ObjectMeta{Name: strings.Repeat("n", 63)}, Status: hugeStatus(spec.PhaseReconnecting)})
	if b := d.within(0); len(b) > floor {
		t.Fatalf("the smallest form of a document is %d bytes, over a file's even share of %d:\n%s", len(b), floor, b)
	}
	var names []string
	for i := range spec.MaxDocuments {
		names = append(names, fmt.Sprintf("%s%04d", strings.Repeat("n", 59), i))
	}
	w, m := writerFor(t, names)
	w.SetWriteInterval(time.Hour) // one write, at Close
	for i, name := range names {
		if err := w.Put(desired.Entry{Name: name, Origin: m, Index: i}, hugeStatus(spec.Phases[i%len(spec.Phases)])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(w.Path(m))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > MaxFileSize {
		t.Fatalf("status file is %d bytes, over the %d its readers accept", fi.Size(), MaxFileSize)
	}
	docs, err := Read(w.Path(m))
	if err != nil {
		t.Fatalf("the status file does not read back: %v", err)
	}
	if len(docs) != len(names) {
		t.Fatalf("%d documents read back, want %d", len(docs), len(names))
	}
	for i, name := range names {
		if got, want := docs[name].Status.Phase, spec.Phases[i%len(spec.Phases)]; got != want {
			t.Fatalf("%s: phase %s, want %s", name, got, want)
		}
	}
	t.Logf("%d documents: %d bytes (limit %d)", len(names), fi.Size(), MaxFileSize)
}

// TestFitKeepsWhatFits: documents that fit together are written whole; when
// they do not, the largest give way (the newest stderr lines kept) and the
// small ones stay whole.
func TestFitKeepsWhatFits(t *testing.T) {
	small := newDocument(spec.StatusDocument{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.ObjectMeta{Name: "small"}, Status: attemptStatus(1)})
	big := func(name string) *document {
		st := attemptStatus(2)
		var tail []string
		for i := range 20 {
			tail = append(tail, fmt.Sprintf("line %02d %s", i, strings.Repeat("x", 1000)))
		}
		st.Process = &spec.ProcessStatus{StderrTail: tail}
		return newDocument(spec.StatusDocument{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.ObjectMeta{Name: name}, Status: st})
	}
	docs := []*document{small, big("b1"), big("b2")}
	whole := fitDocuments(docs, 1<<20)
	for i, d := range docs {
		if string(whole[i]) != string(d.levels[0]) {
			t.Fatalf("document %d was cut though all fit", i)
		}
	}
	limit := len(small.levels[0]) + 2*15000 + 2*len(separator)
	cut := fitDocuments(docs, limit)
	total := 2 * len(separator)
	for _, b := range cut {
		total += len(b)
	}
	if total > limit {
		t.Fatalf("%d bytes, over the limit of %d", total, limit)
	}
	if string(cut[0]) != string(small.levels[0]) {
		t.Errorf("the small document was cut")
	}
	for _, b := range cut[1:] {
		if !strings.Contains(string(b), "line 19") || strings.Contains(string(b), "line 00") {
			t.Errorf("a cut document does not keep the newest stderr lines:\n%.300s", b)
		}
	}
}

// TestCut: a cut never splits a character and is marked.
func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc…"},
		{"aéb", 2, "a…"},
		{"abc", 0, ""},
	} {
		if got := cut(tc.in, tc.n); got != tc.want {
			t.Errorf("cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// TestWriterFailedWritesArePaced: every attempt takes a token of the pace,
// one that fails too, so a status directory that cannot be written costs
// no more tries than the pace allows; the change put off still lands.
func TestWriterFailedWritesArePaced(t *testing.T) {
	for _, burst := range []int{1, 3} {
		t.Run(fmt.Sprint(burst), func(t *testing.T) {
			root := t.TempDir()
			blocker := filepath.Join(t.TempDir(), "status")
			if err := os.WriteFile(blocker, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			m := filepath.Join(root, "m.yaml")
			w := NewWriter(root, blocker, func(string) []string { return []string{"x"} })
			w.SetWriteInterval(time.Hour)
			w.SetWriteBurst(burst)
			e := desired.Entry{Name: "x", Origin: m}
			for i := range burst {
				if err := w.Put(e, attemptStatus(i)); err == nil {
					t.Fatalf("Put %d: no error, with the status directory a file", i)
				}
			}
			if err := os.Remove(blocker); err != nil {
				t.Fatal(err)
			}
			// The burst was spent on failed attempts: this change waits.
			if err := w.Put(e, attemptStatus(burst)); err == nil {
				t.Fatal("a change put off after failed writes returned no error: it should carry the last failure")
			}
			if _, ok := attemptOnDisk(t, w.Path(m), "x"); ok {
				t.Fatal("a write went out past the pace: failed attempts did not take its tokens")
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if n, ok := attemptOnDisk(t, w.Path(m), "x"); !ok || n != burst {
				t.Fatalf("after Close: attempt %d (found %v), want the last change, %d", n, ok, burst)
			}
		})
	}
}

// TestFillCeiling: the highest common ceiling the sizes fit under.
func TestFillCeiling(t *testing.T) {
	for _, tc := range []struct {
		sizes  []int
		budget int
		want   int
	}{
		{[]int{10, 20, 30}, 45, 17}, // 10 whole, then (45-10)/2
		{[]int{100}, 50, 50},
		{[]int{5, 5, 100}, 60, 50},
		{[]int{30, 10, 20}, 59, 29}, // unsorted; 10 and 20 whole, then 29
	} {
		full := make([][]byte, len(tc.sizes))
		for i, n := range tc.sizes {
			full[i] = make([]byte, n)
		}
		if got := fillCeiling(full, tc.budget); got != tc.want {
			t.Errorf("fillCeiling(%v, %d) = %d, want %d", tc.sizes, tc.budget, got, tc.want)
		}
	}
}

// TestFitExactLimit: documents that take exactly the limit, separators
// counted, are left whole; one byte less cuts the largest.
func TestFitExactLimit(t *testing.T) {
	doc := func(name string, lines int) *document {
		st := attemptStatus(1)
		for i := range lines {
			if st.Process == nil {
				st.Process = &spec.ProcessStatus{}
			}
			st.Process.StderrTail = append(st.Process.StderrTail, fmt.Sprintf("line %02d %s", i, strings.Repeat("y", 500)))
		}
		return newDocument(spec.StatusDocument{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.ObjectMeta{Name: name}, Status: st})
	}
	docs := []*document{doc("a", 0), doc("b", 20), doc("c", 0)}
	exact := 2 * len(separator)
	for _, d := range docs {
		exact += len(d.levels[0])
	}
	for i, b := range fitDocuments(docs, exact) {
		if string(b) != string(docs[i].levels[0]) {
			t.Errorf("limit %d (exactly their size): document %d was cut", exact, i)
		}
	}
	out := fitDocuments(docs, exact-1)
	if string(out[1]) == string(docs[1].levels[0]) {
		t.Errorf("limit %d (one byte short): the largest document was not cut", exact-1)
	}
	if string(out[0]) != string(docs[0].levels[0]) || string(out[2]) != string(docs[2].levels[0]) {
		t.Errorf("one byte short: a small document was cut")
	}
	if got := docs[1].within(len(docs[1].levels[0])); string(got) != string(docs[1].levels[0]) {
		t.Errorf("within its own size a document is cut")
	}
	// Exactly the size with the largest document's first cut: that cut,
	// no further (the separators are counted once each); one byte less:
	// cut further.
	first := docs[1].within(len(docs[1].levels[0]) - 1)
	limit := len(docs[0].levels[0]) + len(docs[2].levels[0]) + 2*len(separator) + len(first)
	if out := fitDocuments(docs, limit); string(out[1]) != string(first) {
		t.Errorf("limit %d (exactly the size with the first cut): the largest document is %d bytes, want its first cut's %d", limit, len(out[1]), len(first))
	}
	out = fitDocuments(docs, limit-1)
	if n := len(joinDocuments(out)); n > limit-1 || len(out[1]) >= len(first) {
		t.Errorf("limit %d: %d bytes, the largest document %d, want within the limit and below its first cut's %d", limit-1, n, len(out[1]), len(first))
	}
}

// TestShrinkLevels: each level keeps the newest stderr lines it allows,
// and the bare form drops what is only for people.
func TestShrinkLevels(t *testing.T) {
	st := hugeStatus(spec.PhaseConnected)
	for _, l := range shrinkLevels {
		got := shrink(st, l)
		tail := 0
		if got.Process != nil {
			tail = len(got.Process.StderrTail)
		}
		if tail != l.tail {
			t.Errorf("level %+v: %d stderr lines, want %d", l, tail, l.tail)
		}
		if len(got.Collisions) != l.list || len(got.LastError) > l.str+len("…") {
			t.Errorf("level %+v: %d collisions, lastError of %d bytes", l, len(got.Collisions), len(got.LastError))
		}
		if l.bare != (got.Server == nil) || l.bare != (got.Catalog == nil) || l.bare != (got.Process.PID == 0) || l.bare != (got.Prompts == nil) {
			t.Errorf("level %+v: bare form is %v, but server %v, catalog %v, pid %d, prompts %v", l, l.bare, got.Server, got.Catalog, got.Process.PID, got.Prompts)
		}
	}
	if st.Process.PID == 0 || len(st.Process.StderrTail) != 20 || st.Conditions[0].Message == "" {
		t.Errorf("shrink changed the status it was given")
	}
}

// TestWriterLeavesSameContentAlone: a Put that does not change the file's
// bytes does not rewrite it, and documents are joined by one separator.
func TestWriterLeavesSameContentAlone(t *testing.T) {
	w, m := writerFor(t, []string{"a", "b"})
	for _, name := range []string{"a", "b"} {
		if err := w.Put(desired.Entry{Name: name, Origin: m}, attemptStatus(1)); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.Stat(w.Path(m))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put(desired.Entry{Name: "a", Origin: m}, attemptStatus(1)); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(w.Path(m))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Errorf("an unchanged status was written again")
	}
	data, err := os.ReadFile(w.Path(m))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "apiVersion: ") || strings.Count(string(data), "\n"+separator) != 1 {
		t.Errorf("two documents are not joined by one separator:\n%s", data)
	}
}

// TestWriterPutOffWriteRetriesAfterFailure: a put-off write that fails is
// tried again each interval, its error returned to the next Put, until
// it lands.
func TestWriterPutOffWriteRetriesAfterFailure(t *testing.T) {
	root := t.TempDir()
	statusDir := filepath.Join(t.TempDir(), "status")
	m := filepath.Join(root, "m.yaml")
	w := NewWriter(root, statusDir, func(string) []string { return []string{"x"} })
	// Long enough that the second Put surely comes within it, so that its
	// write is put off (a failure at once would be the caller's to retry).
	w.SetWriteInterval(500 * time.Millisecond)
	t.Cleanup(func() { _ = w.Close() })
	e := desired.Entry{Name: "x", Origin: m}
	if err := w.Put(e, attemptStatus(1)); err != nil {
		t.Fatal(err)
	}
	// The directory turns into a file: the next writes fail.
	if err := os.RemoveAll(statusDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(statusDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(e, attemptStatus(2)); err != nil {
		t.Fatalf("within the interval a Put wrote at once: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.Put(e, attemptStatus(2)) == nil {
		if time.Now().After(deadline) {
			t.Fatal("a failing put-off write never reached a Put as an error")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.Remove(statusDir); err != nil {
		t.Fatal(err)
	}
	for {
		if n, ok := attemptOnDisk(t, w.Path(m), "x"); ok && n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the put-off write never landed once the directory could be written")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// blockedWriter returns a writer whose status directory is a regular file
// (every write fails until unblock removes it), the manifest m.yaml of its
// tree, and unblock. names is what m.yaml declares, read under a lock: the
// writer's retries call it from their own goroutine.
func blockedWriter(t *testing.T, names *[]string, mu *sync.Mutex) (*Writer, string, func()) {
	t.Helper()
	root := t.TempDir()
	blocker := filepath.Join(t.TempDir(), "status")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(root, blocker, func(string) []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), (*names)...)
	})
	t.Cleanup(func() { _ = w.Close() })
	return w, filepath.Join(root, "m.yaml"), func() {
		if err := os.Remove(blocker); err != nil {
			t.Fatal(err)
		}
	}
}

// waitOnDisk waits until ok holds of the documents of the status file at
// path (absent: nil).
func waitOnDisk(t *testing.T, path, what string, ok func(map[string]spec.StatusDocument) bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		docs, _ := Read(path)
		if ok(docs) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never; on disk: %v", what, docs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func isInvalid(docs map[string]spec.StatusDocument, name string) bool {
	d, ok := docs[name]
	return ok && d.Status.Phase == spec.PhaseInvalid
}

var dup = []manifest.Rejected{{Name: "dup", Index: 1, Error: `name "dup" is declared in a.yaml already`}}

// TestWriterRejectedSentAgainAfterFailedWrite: the status of rejected
// documents whose write failed is not taken as written: the same
// rejections sent again write it (the retry is an hour away here).
func TestWriterRejectedSentAgainAfterFailedWrite(t *testing.T) {
	var mu sync.Mutex
	var names []string
	w, m, unblock := blockedWriter(t, &names, &mu)
	w.SetWriteInterval(time.Hour) // the writer's own retry: retryMax away
	w.SetWriteBurst(2)            // a token left for the second attempt: the failed one took one
	byFile := map[string][]manifest.Rejected{m: dup}
	if err := w.SetRejected(byFile, time.Now()); err == nil {
		t.Fatal("SetRejected: no error, with the status directory a file")
	}
	unblock()
	if err := w.SetRejected(byFile, time.Now()); err != nil {
		t.Fatal(err)
	}
	if docs, err := Read(w.Path(m)); err != nil || !isInvalid(docs, "dup") {
		t.Fatalf("the same rejections sent again once the directory could be written: %v, %v; want dup Invalid", docs, err)
	}
}

// TestWriterDroppedRejectionSentAgainAfterFailedWrite: rejections dropped
// while their status file cannot be written leave it once it can, when the
// same (none) are sent again.
func TestWriterDroppedRejectionSentAgainAfterFailedWrite(t *testing.T) {
	root, base := t.TempDir(), t.TempDir()
	statusDir := filepath.Join(base, "status")
	m := filepath.Join(root, "m.yaml")
	w := NewWriter(root, statusDir, func(string) []string { return []string{"x"} })
	w.SetWriteInterval(0)
	t.Cleanup(func() { _ = w.Close() })
	if err := w.Put(desired.Entry{Name: "x", Origin: m}, attemptStatus(1)); err != nil {
		t.Fatal(err)
	}
	if err := w.SetRejected(map[string][]manifest.Rejected{m: dup}, time.Now()); err != nil {
		t.Fatal(err)
	}
	// The status directory is moved away, a file in its place.
	aside := filepath.Join(base, "aside")
	if err := os.Rename(statusDir, aside); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(statusDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.SetRejected(nil, time.Now()); err == nil {
		t.Fatal("SetRejected: no error, with the status directory a file")
	}
	if err := os.Remove(statusDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(aside, statusDir); err != nil {
		t.Fatal(err)
	}
	// (The writer's own retry is retryFirst away: this call comes first.)
	if err := w.SetRejected(nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	docs, err := Read(w.Path(m))
	if _, ok := docs["x"]; err != nil || !ok || isInvalid(docs, "dup") {
		t.Fatalf("no rejections sent again once the directory could be written: %v, %v; want x alone", docs, err)
	}
}

// TestWriterRetriesFailedWrite: a failed write is tried again by the
// writer itself (nobody else may: the status of rejected documents), with
// the write interval 0 as with one.
func TestWriterRetriesFailedWrite(t *testing.T) {
	for _, interval := range []time.Duration{0, 30 * time.Millisecond} {
		t.Run(interval.String(), func(t *testing.T) {
			var mu sync.Mutex
			names := []string{"x"}
			w, m, unblock := blockedWriter(t, &names, &mu)
			w.SetWriteInterval(interval)
			if err := w.Put(desired.Entry{Name: "x", Origin: m}, attemptStatus(7)); err == nil {
				t.Fatal("Put: no error, with the status directory a file")
			}
			if err := w.SetRejected(map[string][]manifest.Rejected{m: dup}, time.Now()); err == nil {
				t.Fatal("SetRejected: no error, with the status directory a file")
			}
			unblock()
			waitOnDisk(t, w.Path(m), "the failed writes landed without another call", func(docs map[string]spec.StatusDocument) bool {
				return isInvalid(docs, "dup") && docs["x"].Status.Attempt == 7
			})
		})
	}
}

// TestWriterDeleteAfterFailedPut: a connection whose Put failed, and whose
// status the retry then wrote, is removed by Delete: the writer knows
// where the document is from the Put on, not from its first write.
func TestWriterDeleteAfterFailedPut(t *testing.T) {
	var mu sync.Mutex
	names := []string{"x"}
	w, m, unblock := blockedWriter(t, &names, &mu)
	if err := w.Put(desired.Entry{Name: "x", Origin: m}, attemptStatus(1)); err == nil {
		t.Fatal("Put: no error, with the status directory a file")
	}
	unblock()
	waitOnDisk(t, w.Path(m), "the retry wrote x", func(docs map[string]spec.StatusDocument) bool {
		_, ok := docs["x"]
		return ok
	})
	mu.Lock()
	names = nil // the manifest is gone
	mu.Unlock()
	if err := w.Delete("x"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.Path(m)); !os.IsNotExist(err) {
		t.Fatalf("after Delete the status file of the deleted connection is still there: %v", err)
	}
}

// TestWriterCloseRetriesFailedWrite: Close tries a failed write once more:
// the final status at shutdown is not lost to a write that failed before.
func TestWriterCloseRetriesFailedWrite(t *testing.T) {
	var mu sync.Mutex
	names := []string{"x"}
	w, m, unblock := blockedWriter(t, &names, &mu)
	w.SetWriteInterval(time.Hour) // the writer's own retry: retryMax away
	if err := w.Put(desired.Entry{Name: "x", Origin: m}, attemptStatus(4)); err == nil {
		t.Fatal("Put: no error, with the status directory a file")
	}
	unblock()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n, ok := attemptOnDisk(t, w.Path(m), "x"); !ok || n != 4 {
		t.Fatalf("after Close: attempt %d (found %v), want 4", n, ok)
	}
}

// TestRetryDelay: the retry after the interval (or retryFirst), doubling,
// never over retryMax.
func TestRetryDelay(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		fails    int
		want     time.Duration
	}{
		{0, 1, retryFirst}, {0, 2, 2 * retryFirst}, {0, 3, 4 * retryFirst}, {0, 1000, retryMax},
		{time.Second, 1, time.Second}, {time.Second, 3, 4 * time.Second}, {time.Second, 4, retryMax},
		{time.Hour, 1, retryMax},
	} {
		w := NewWriter("", "", nil)
		w.SetWriteInterval(tc.interval)
		if got := w.retryDelay(tc.fails); got != tc.want {
			t.Errorf("retryDelay(%d) with interval %v = %v, want %v", tc.fails, tc.interval, got, tc.want)
		}
	}
}

// TestFitManyNameWarnings: a server can offer 100,000 names the gateway
// does not serve as offered; the status file still reads back (at most
// maxNameWarnings listed, the rest counted), and the smallest form of the
// document still fits a file's even share.
func TestFitManyNameWarnings(t *testing.T) {
	st := hugeStatus(spec.PhaseConnected)
	for i := range 20000 {
		st.NameWarnings = append(st.NameWarnings, spec.NameWarning{Name: fmt.Sprintf("tool:%s%05d", strings.Repeat("w", 70), i), Warning: strings.Repeat("x", 200)})
	}
	floor := (MaxFileSize - len(separator)*(spec.MaxDocuments-1)) / spec.MaxDocuments
	d := newDocument(spec.StatusDocument{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.ObjectMeta{Name: "many"}, Status: st})
	if b := d.within(0); len(b) > floor {
		t.Fatalf("the smallest form of a document is %d bytes, over a file's even share of %d", len(b), floor)
	}
	w, m := writerFor(t, []string{"many"})
	if err := w.Put(desired.Entry{Name: "many", Origin: m}, st); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	docs, err := Read(w.Path(m))
	if err != nil {
		t.Fatalf("the status file does not read back: %v", err)
	}
	got := docs["many"].Status.NameWarnings
	if len(got) == 0 || len(got) > maxNameWarnings+1 {
		t.Fatalf("%d name warnings read back, want 1 to %d", len(got), maxNameWarnings+1)
	}
	last := got[len(got)-1]
	if want := fmt.Sprintf("and %d more", 20000-(len(got)-1)); last.Name != moreWarnings || last.Warning != want {
		t.Fatalf("last name warning %+v, want %q counting the rest", last, want)
	}
}

// TestWriterReplacesOneFileOfADirectoryAtATime: while a status file is
// being replaced, another of the same directory waits for it (the kernel
// would make it spin on the directory's lock), and one of another
// directory does not.
func TestWriterReplacesOneFileOfADirectoryAtATime(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"one", "two"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w := NewWriter(root, "", func(m string) []string {
		return []string{strings.TrimSuffix(filepath.Base(m), ".yaml")}
	})
	entered := make(chan string, 3)
	release := make(chan struct{})
	var mu sync.Mutex
	busy := map[string]int{} // directory → writes in progress
	most := 0
	w.write = func(path string, data []byte, perm, dirPerm os.FileMode) error {
		dir := filepath.Dir(path)
		mu.Lock()
		busy[dir]++
		most = max(most, busy[dir])
		mu.Unlock()
		entered <- filepath.Base(path)
		if strings.HasPrefix(filepath.Base(path), "a.") {
			<-release
		}
		mu.Lock()
		busy[dir]--
		mu.Unlock()
		return os.WriteFile(path, data, perm)
	}
	put := func(dir, name string) chan error {
		done := make(chan error, 1)
		go func() {
			e := desired.Entry{Name: name, Origin: filepath.Join(root, dir, name+".yaml")}
			done <- w.Put(e, attemptStatus(1))
		}()
		return done
	}
	wait := func(what string, ch <-chan error) {
		t.Helper()
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still waiting", what)
		}
	}
	aDone := put("one", "a")
	if got := <-entered; got != "a.status.yaml" {
		t.Fatalf("first write %s, want a's", got)
	}
	// Another directory's file is written while a's is held.
	wait("c, in another directory, while a's write is held", put("two", "c"))
	if got := <-entered; got != "c.status.yaml" {
		t.Fatalf("write %s, want c's", got)
	}
	bDone := put("one", "b")
	// b waits on a's directory: the lock a's write holds is that one.
	lock := func() *sync.Mutex {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.dirs[filepath.Join(root, "one")]
	}()
	if lock == nil || lock.TryLock() {
		t.Fatal("a's write does not hold its directory's lock")
	}
	close(release)
	wait("a", aDone)
	wait("b", bDone)
	if most != 1 {
		t.Errorf("%d files of one directory were replaced at once, want 1", most)
	}
	for _, n := range []string{"one/a", "one/b", "two/c"} {
		if _, ok := attemptOnDisk(t, filepath.Join(root, n+".status.yaml"), filepath.Base(n)); !ok {
			t.Errorf("%s's status not written", n)
		}
	}
}
