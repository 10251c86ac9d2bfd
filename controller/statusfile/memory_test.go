package statusfile

import (
	"testing"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/spec"
)

// TestWriterKeepsOneCopyOfAFile: what the writer keeps of a connection's
// status is one copy of its exact size. A file of one document shares the
// document's rendering, and a rendering holds no spare capacity (a 1.3 KB
// document in a bytes.Buffer grown from 1 KB held 2.3 KB, and the file's
// bytes as much again).
func TestWriterKeepsOneCopyOfAFile(t *testing.T) {
	w, m := writerFor(t, []string{"one"})
	st := attemptStatus(3)
	for range 12 { // a document of well over 1 KB
		st.Conditions = append(st.Conditions, spec.Condition{Type: "Ready", Status: spec.ConditionFalse,
			Reason: "Connecting", Message: "a message long enough to make the document grow past one kilobyte"})
	}
	if err := w.Put(desired.Entry{Name: "one", Origin: m}, st); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	doc := w.rendered["one"].levels[0]
	file := w.files[w.Path(m)]
	if len(doc) < 1100 {
		t.Fatalf("the document is %d bytes, want one over 1 KB", len(doc))
	}
	if len(file) != len(doc) || &file[0] != &doc[0] {
		t.Error("the file of one document holds a copy of its rendering")
	}
	if spare := cap(doc) - len(doc); spare >= 256 {
		t.Errorf("the rendering of %d bytes holds %d spare", len(doc), spare)
	}
}
