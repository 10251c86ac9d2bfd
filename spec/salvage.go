package spec

import (
	"bytes"
	"regexp"
)

var (
	flowName          = regexp.MustCompile(`^name:[ \t]*["']?([a-z0-9][-a-z0-9]*)["']?[ \t]*(?:[,}#]|$)`)
	blockMetadataName = regexp.MustCompile(`^name:[ \t]*["']?([a-z0-9][-a-z0-9]*)["']?[ \t]*(?:#.*)?$`)
)

// salvageName reads metadata.name from a document that is not valid YAML,
// line by line: a "metadata:" line in column 0, then "name: x" either in its
// flow mapping or on the first indented line at the first child indentation.
// It is a best effort so that the controller can tie a broken document to
// the connection it used to describe (and keep that connection, reporting
// the error) instead of taking the connection for removed. It returns only
// a valid DNS-1123 label, else "".
func salvageName(text []byte) string {
	lines := bytes.Split(text, []byte("\n"))
	for i, l := range lines {
		l = bytes.TrimRight(l, "\r")
		if !bytes.HasPrefix(l, []byte("metadata:")) {
			continue
		}
		if rest := bytes.TrimLeft(l[len("metadata:"):], " \t"); len(rest) > 0 && rest[0] == '{' {
			return flowMetadataName(rest)
		}
		indent := -1
		for _, c := range lines[i+1:] {
			c = bytes.TrimRight(c, "\r")
			t := bytes.TrimLeft(c, " ")
			if len(t) == 0 || t[0] == '#' {
				continue
			}
			n := len(c) - len(t)
			if n == 0 {
				break // back at the top level: metadata has ended
			}
			if indent < 0 {
				indent = n
			}
			if n != indent {
				continue // deeper: a label called name, say
			}
			if m := blockMetadataName.FindSubmatch(t); m != nil {
				return labelOrEmpty(string(m[1]))
			}
		}
		return ""
	}
	return ""
}

func labelOrEmpty(s string) string {
	if len(s) > maxNameLen || !dns1123Label.MatchString(s) {
		return ""
	}
	return s
}

// flowMetadataName finds "name: x" at the top level of a flow mapping that
// starts at flow[0] == '{', skipping nested mappings such as labels.
func flowMetadataName(flow []byte) string {
	depth := 0
	for i := 0; i < len(flow); i++ {
		switch flow[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
		if depth == 1 && (flow[i] == '{' || flow[i] == ',') {
			rest := bytes.TrimLeft(flow[i+1:], " \t")
			if m := flowName.FindSubmatch(rest); m != nil {
				return labelOrEmpty(string(m[1]))
			}
		}
		if depth <= 0 {
			break
		}
	}
	return ""
}
