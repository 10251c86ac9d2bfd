package spec

import (
	"fmt"
	"strings"
)

// FieldError is one problem in a manifest file: it names the file, the
// document, the field path and what is wrong. It never holds a secret value.
type FieldError struct {
	File  string
	Index int    // document index (0-based); -1 for a whole-file problem
	Line  int    // line of the problem when known, else the document's start line
	Field string // e.g. "spec.healthCheck.interval"; "" when not about one field
	Msg   string
	// DocLine is the line the document starts on (its "---" marker, or its
	// first line of content); 0 for a whole-file problem.
	DocLine int
}

// Document returns the 1-based document number people read in messages; 0
// for a whole-file problem.
func (e *FieldError) Document() int {
	if e.Index < 0 {
		return 0
	}
	return e.Index + 1
}

// Error formats the problem on one line, position first so that editors and
// terminals can jump to it:
//
//	examples/bad.yaml:17: document 2 (line 14): spec.healthCheck.interval: invalid duration "3x": unknown unit "x"
//	examples/huge.yaml: file is 2097152 bytes, over the limit of 1048576
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Index >= 0 {
		fmt.Fprintf(&b, "document %d (line %d): ", e.Index+1, e.DocLine)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(oneLine(e.Msg))
	return b.String()
}

// oneLine keeps an error to one line whatever a library put in its message.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}
