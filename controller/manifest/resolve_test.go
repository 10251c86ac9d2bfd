package manifest

import (
	"reflect"
	"testing"

	"github.com/tether-mcp/tether/spec"
)

// TestResolveNamelessDocument: a document without a name keeps its file's
// old names alive only when it has errors (the name may be behind one); an
// error-free one, such as a document of comments only, does not.
func TestResolveNamelessDocument(t *testing.T) {
	prev, _, _ := Resolve(nil, []File{parsed("x.yaml", manifest("a", ""))})
	for _, tc := range []struct {
		name      string
		doc       spec.Document
		wantAlive bool
	}{
		{"with an error", spec.Document{Errors: []*spec.FieldError{{File: "x.yaml", Field: "metadata.name", Msg: "required"}}}, true},
		{"without errors", spec.Document{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, _, _ := Resolve(prev, []File{{Path: "x.yaml", Docs: []spec.Document{tc.doc}}})
			e, alive := next["a"]
			if alive != tc.wantAlive {
				t.Fatalf("a alive = %v, want %v (%+v)", alive, tc.wantAlive, e)
			}
			if alive && (e.Conn == nil || e.ManifestError == "") {
				t.Errorf("a = %+v; want its last spec with the file's error", e)
			}
		})
	}
}

// TestResolveRejectedOrder: a file's rejected documents are listed in
// document order, whatever order the names were resolved in.
func TestResolveRejectedOrder(t *testing.T) {
	var owner, dup string
	for _, n := range []string{"e", "b", "d", "a", "c"} {
		owner += manifest(n, "") + "---\n"
		dup += manifest(n, "") + "---\n"
	}
	_, _, rejected := Resolve(nil, []File{parsed("a.yaml", owner), parsed("b.yaml", dup)})
	var got []string
	var idx []int
	for _, r := range rejected["b.yaml"] {
		got = append(got, r.Name)
		idx = append(idx, r.Index)
	}
	if want := []string{"e", "b", "d", "a", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("rejected = %v (indexes %v), want %v", got, idx, want)
	}
}
