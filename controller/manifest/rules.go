package manifest

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/spec"
)

// File is one manifest file as read from the tree.
type File struct {
	Path string
	// Err is a whole-file problem (unreadable, or a status-file clash);
	// Docs is then empty.
	Err  error
	Docs []spec.Document
}

// Problems are the problems of the manifest files of one listing, by file,
// as logs, the tether_manifest_errors metric and `tether validate` report
// them.
type Problems map[string][]string

// Rejected is a document that decodes but that the tree's rules refuse: its
// name is declared in another file already. It still gets a status
// document (phase Invalid), so the file's status says why.
type Rejected struct {
	Name  string
	Index int
	Error string
}

type claim struct {
	file string
	doc  *spec.Document
}

// Resolve applies the tree's rules to a full listing: it returns the desired
// state the files declare and every file's problems.
//
// It is level-triggered: the result depends only on the files and on prev,
// the desired state before (for the last valid spec and for which file
// owned a name first), never on which events led here. Rules:
//   - a valid document sets its name's spec;
//   - an invalid document keeps its name's last valid spec and sets
//     ManifestError;
//   - a name declared in two files belongs to the file that had it before
//     (else the first in path order); the other file gets an error naming
//     the owner (DuplicateError);
//   - a name no file declares any more is removed, unless its file still
//     exists and holds a document whose name cannot be read (a typo must not
//     tear down a working connection).
//
// An unchanged spec keeps its pointer, so that desired.Entry.Equal is cheap.
//
// rejected lists, by file, the documents refused for their name.
func Resolve(prev map[string]desired.Entry, files []File) (next map[string]desired.Entry, problems Problems, rejected map[string][]Rejected) {
	files = append([]File(nil), files...)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })

	claims := map[string][]claim{}
	problems = Problems{}
	opaque := map[string]string{} // files with content whose names cannot all be read → first problem
	present := map[string]bool{}
	for i := range files {
		f := &files[i]
		present[f.Path] = true
		if f.Err != nil {
			problems[f.Path] = append(problems[f.Path], f.Err.Error())
			opaque[f.Path] = f.Err.Error()
			continue
		}
		for j := range f.Docs {
			doc := &f.Docs[j]
			for _, e := range doc.Errors {
				problems[f.Path] = append(problems[f.Path], e.Error())
			}
			if doc.Name == "" {
				if len(doc.Errors) > 0 {
					if _, ok := opaque[f.Path]; !ok {
						opaque[f.Path] = joinErrors(doc.Errors)
					}
				}
				continue
			}
			claims[doc.Name] = append(claims[doc.Name], claim{file: f.Path, doc: doc})
		}
	}

	next = map[string]desired.Entry{}
	rejected = map[string][]Rejected{}
	duplicate := func(c claim, owner string) {
		msg := DuplicateError(c.file, c.doc, owner).Error()
		problems[c.file] = append(problems[c.file], msg)
		rejected[c.file] = append(rejected[c.file], Rejected{Name: c.doc.Name, Index: c.doc.Index, Error: msg})
	}
	for name, cs := range claims {
		old, hadOld := prev[name]
		// A file that cannot be read in full keeps the names it had.
		if hadOld && present[old.Origin] && opaque[old.Origin] != "" && !claimedBy(cs, old.Origin) {
			e := old
			e.ManifestError = opaque[old.Origin]
			next[name] = e
			for _, c := range cs {
				duplicate(c, old.Origin)
			}
			continue
		}
		owner := 0
		if hadOld {
			for i, c := range cs {
				if c.file == old.Origin {
					owner = i
					break
				}
			}
		}
		for i, c := range cs {
			if i != owner {
				duplicate(c, cs[owner].file)
			}
		}
		c := cs[owner]
		e := desired.Entry{Name: name, Origin: c.file, Index: c.doc.Index, Dir: filepath.Dir(c.file)}
		if hadOld {
			e.Conn = old.Conn
		}
		if len(c.doc.Errors) == 0 && c.doc.Conn != nil {
			e.Conn = desired.Keep(e.Conn, c.doc.Conn)
		} else {
			e.ManifestError = joinErrors(c.doc.Errors)
		}
		next[name] = e
	}
	// Names nobody declares any more survive only in a file that still
	// exists but cannot be read in full.
	for name, old := range prev {
		if _, ok := next[name]; ok {
			continue
		}
		problem, isOpaque := opaque[old.Origin]
		if !present[old.Origin] || !isOpaque {
			continue
		}
		e := old
		e.ManifestError = problem
		next[name] = e
	}
	for _, rs := range rejected {
		slices.SortFunc(rs, func(a, b Rejected) int { return cmp.Compare(a.Index, b.Index) })
	}
	return next, problems, rejected
}

// DuplicateError is the problem of a document whose metadata.name another
// file (owner) declares already: names are unique across the whole tree.
func DuplicateError(file string, doc *spec.Document, owner string) *spec.FieldError {
	return &spec.FieldError{
		File: file, Index: doc.Index, DocLine: doc.Line, Line: doc.Line, Field: "metadata.name",
		Msg: fmt.Sprintf("%q is already declared in %s", doc.Name, owner),
	}
}

func claimedBy(cs []claim, file string) bool {
	for _, c := range cs {
		if c.file == file {
			return true
		}
	}
	return false
}

func joinErrors(errs []*spec.FieldError) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}
