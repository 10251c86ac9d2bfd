package statusfile

import (
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/tether-mcp/tether/spec"
)

// MaxFileSize is the most a status file tether writes can hold. It is the
// cap status files are read with (Read, tether get: spec.MaxFileSize), so
// that every file tether writes reads back. A file holds at most
// spec.MaxDocuments documents (one per document of its manifest), so each
// gets at least (MaxFileSize - 4·(MaxDocuments-1)) / MaxDocuments = 1044
// bytes; the smallest form of a document (shrinkLevels' last) is smaller
// than that whatever it holds (TestFitWorstCase). docs/contract.md §5a.
const MaxFileSize = spec.MaxFileSize

// separator is what goes between two documents of a status file.
const separator = "---\n"

// document is one status document of a status file: the status it holds
// and its renderings, full first, then shrunk ones made when needed.
type document struct {
	doc    spec.StatusDocument
	levels [][]byte // levels[i]: rendered at shrinkLevels[i-1]; [0] the full one
}

func newDocument(doc spec.StatusDocument) *document {
	doc.Status.NameWarnings = cutWarnings(doc.Status.NameWarnings, maxNameWarnings, math.MaxInt)
	return &document{doc: doc, levels: [][]byte{render(&doc)}}
}

// maxNameWarnings is how many name warnings a status document shows in
// full; the rest are counted in one last entry (docs/contract.md §5a). A
// server can offer 100,000 names the gateway does not serve as offered:
// listed one by one they would outgrow MaxFileSize at any shrink level.
const maxNameWarnings = 100

// moreWarnings is the name of the last entry of a cut list of name
// warnings, whose warning counts the entries left out.
const moreWarnings = "…"

// cutWarnings keeps the first n of ws, each cut to str bytes, and counts
// the rest in one last entry.
func cutWarnings(ws []spec.NameWarning, n, str int) []spec.NameWarning {
	if len(ws) == 0 {
		return nil
	}
	left := len(ws)
	if k := len(ws) - 1; ws[k].Name == moreWarnings {
		// Cut before (newDocument's cap): its count stands for more.
		var more int
		if _, err := fmt.Sscanf(ws[k].Warning, "and %d more", &more); err == nil {
			left += more - 1
			ws = ws[:k]
		}
	}
	out := make([]spec.NameWarning, 0, min(len(ws), n)+1)
	for _, w := range ws[:min(len(ws), n)] {
		out = append(out, spec.NameWarning{Name: cut(w.Name, str), Warning: cut(w.Warning, str)})
	}
	if more := left - len(out); more > 0 {
		out = append(out, spec.NameWarning{Name: moreWarnings, Warning: fmt.Sprintf("and %d more", more)})
	}
	return out
}

// within returns the fullest rendering of d that takes at most limit bytes,
// or its smallest.
func (d *document) within(limit int) []byte {
	for i := 0; ; i++ {
		if i == len(d.levels) {
			st := shrink(d.doc.Status, shrinkLevels[i-1])
			doc := d.doc
			doc.Status = st
			d.levels = append(d.levels, render(&doc))
		}
		if len(d.levels[i]) <= limit || i == len(shrinkLevels) {
			return d.levels[i]
		}
	}
}

// shrinkLevel is how far a document is cut to fit its share of a file: the
// stderr lines it keeps (the newest), the bytes it keeps of each string
// that can be long, and the entries it keeps of each list; bare drops
// what is there for people to read beyond the phase (server, catalog,
// counts other than tools, connectedSince, pid).
type shrinkLevel struct {
	tail, str, list int
	bare            bool
}

// shrinkLevels go from a light trim to the smallest form, which keeps the
// phase, the conditions' types, statuses, reasons and times, the tool
// counts, attempt, nextRetryTime, restarts and the last exit code.
var shrinkLevels = []shrinkLevel{
	{tail: 10, str: 1024, list: 20},
	{tail: 3, str: 256, list: 5},
	{tail: 0, str: 64, list: 0},
	{tail: 0, str: 0, list: 0, bare: true},
}

// fitDocuments returns the renderings of docs that, joined by separators,
// take at most limit bytes, leaving every document alone when they all fit.
// Otherwise the largest give way first: every document larger than a
// common ceiling is cut to it, the ceiling chosen as high as the limit
// allows (so it is never below the limit's even share).
func fitDocuments(docs []*document, limit int) [][]byte {
	out := make([][]byte, len(docs))
	total := len(separator) * max(len(docs)-1, 0)
	for i, d := range docs {
		out[i] = d.levels[0]
		total += len(out[i])
	}
	if total <= limit {
		return out
	}
	ceiling := fillCeiling(out, limit-len(separator)*(len(docs)-1))
	for i, d := range docs {
		out[i] = d.within(ceiling) // the full rendering when it fits already
	}
	return out
}

// fillCeiling returns the largest c such that the sizes, each cut to c, sum
// to at most budget ("water filling").
func fillCeiling(full [][]byte, budget int) int {
	sizes := make([]int, len(full))
	for i, b := range full {
		sizes[i] = len(b)
	}
	slices.Sort(sizes)
	for i, s := range sizes {
		rest := len(sizes) - i
		if s*rest > budget {
			return budget / rest
		}
		budget -= s
	}
	return budget // not reached: fitDocuments calls it only when over
}

// shrink returns st with its long parts cut to l. It copies what it
// changes: st's slices are shared with the document it came from.
func shrink(st spec.ConnectionStatus, l shrinkLevel) spec.ConnectionStatus {
	st.Conditions = slices.Clone(st.Conditions)
	for i := range st.Conditions {
		st.Conditions[i].Message = cut(st.Conditions[i].Message, l.str)
	}
	st.LastError = cut(st.LastError, l.str)
	st.ManifestError = cut(st.ManifestError, l.str)
	if s := st.Server; s != nil {
		st.Server = &spec.ServerInfo{Name: cut(s.Name, l.str), Version: cut(s.Version, l.str), ProtocolVersion: cut(s.ProtocolVersion, l.str)}
	}
	if c := st.Catalog; c != nil {
		cc := *c
		cc.Added, cc.Removed = cutList(c.Added, l), cutList(c.Removed, l)
		st.Catalog = &cc
	}
	if p := st.Process; p != nil {
		pp := *p
		pp.StderrTail = cutList(p.StderrTail[max(len(p.StderrTail)-l.tail, 0):], shrinkLevel{str: l.str, list: l.tail})
		if len(pp.StderrTail) == 0 {
			pp.StderrTail = nil
		}
		st.Process = &pp
	}
	if len(st.Collisions) > l.list {
		st.Collisions = st.Collisions[:l.list]
	}
	st.Collisions = slices.Clone(st.Collisions)
	for i := range st.Collisions {
		st.Collisions[i].Tool = cut(st.Collisions[i].Tool, l.str)
		st.Collisions[i].Connection = cut(st.Collisions[i].Connection, l.str)
	}
	if len(st.Collisions) == 0 {
		st.Collisions = nil
	}
	// Cut like Collisions, but never dropped: the last entry counts what
	// is left out, so that even the bare form says how many there are.
	st.NameWarnings = cutWarnings(st.NameWarnings, l.list, l.str)
	if l.bare {
		st.Server, st.Catalog, st.ConnectedSince = nil, nil, nil
		st.Prompts, st.Resources, st.ResourceTemplates = nil, nil, nil
		if st.Process != nil {
			st.Process.PID = 0
		}
	}
	return st
}

// cutList keeps the first l.list strings of list, each cut to l.str.
func cutList(list []string, l shrinkLevel) []string {
	if len(list) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(list), l.list))
	for _, s := range list[:min(len(list), l.list)] {
		out = append(out, cut(s, l.str))
	}
	return out
}

// cut keeps at most n bytes of s, on a character boundary, marking a cut
// with "…"; n = 0 leaves nothing.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n == 0 {
		return ""
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
