package spec

import (
	"bytes"
)

// chunk is the text of one YAML document of a file, cut on "---" markers.
// Each document is parsed on its own, so that a syntax error in one does not
// hide the others, and its line numbers are shifted back by firstLine.
type chunk struct {
	text      []byte
	firstLine int // file line of text's first line (1-based)
	startLine int // the document's start: its "---" line, else its first content line
}

// splitDocuments cuts a stream into documents on lines that start with a
// "---" marker and after lines that are a "..." end marker, the way YAML
// defines them (a marker in column 0 ends any scalar, so a line scan is
// exact). Chunks holding only blank lines, comments and directives are
// glued to the next chunk: a "%YAML" directive belongs to the document
// that follows it, and a leading comment is not a document. A trailing
// such chunk is dropped. Splitting stops once more than limit chunks are
// found, so that a file of markers costs no more than a file of documents.
func splitDocuments(data []byte, limit int) []chunk {
	var (
		chunks    []chunk
		start     int // byte offset of the current chunk
		firstLine = 1 // file line of the current chunk's first line
		startLine int // line of the current chunk's "---", 0 if none
	)
	// flush ends the current chunk at byte end. A blank chunk without a
	// marker is not ended: the next chunk grows over it.
	flush := func(end, nextLine int) {
		text := data[start:end]
		if startLine == 0 && isBlankChunk(text) {
			return
		}
		c := chunk{text: text, firstLine: firstLine, startLine: startLine}
		if c.startLine == 0 {
			c.startLine = firstLine + firstContentLine(text)
		}
		chunks = append(chunks, c)
		start, firstLine, startLine = end, nextLine, 0
	}
	line := 1
	for pos := 0; pos < len(data) && len(chunks) <= limit; line++ {
		next := len(data)
		if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
			next = pos + i + 1
		}
		text := bytes.TrimSuffix(bytes.TrimSuffix(data[pos:next], []byte("\n")), []byte("\r"))
		switch {
		case isMarker(text, "---"):
			if pos > start {
				flush(pos, line)
			}
			startLine = line
		case isMarker(text, "..."):
			flush(next, line+1)
		}
		pos = next
	}
	if start < len(data) && len(chunks) <= limit {
		flush(len(data), line)
	}
	return chunks
}

// isMarker reports whether a line is the document marker m ("---" or
// "..."), alone or followed by white space and more.
func isMarker(line []byte, m string) bool {
	if !bytes.HasPrefix(line, []byte(m)) {
		return false
	}
	return len(line) == len(m) || line[len(m)] == ' ' || line[len(m)] == '\t'
}

// isBlankChunk reports whether text holds no node: only blank lines,
// comments and directives.
func isBlankChunk(text []byte) bool {
	for len(text) > 0 {
		l := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			l, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		if len(l) > 0 && l[0] == '%' {
			continue
		}
		t := bytes.TrimLeft(l, " \t\r")
		if len(t) > 0 && t[0] != '#' {
			return false
		}
	}
	return true
}

// firstContentLine returns the 0-based offset of the first line of text that
// is not blank, a comment or a directive.
func firstContentLine(text []byte) int {
	for n := 0; len(text) > 0; n++ {
		l := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			l, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		t := bytes.TrimLeft(l, " \t\r")
		if len(t) > 0 && t[0] != '#' && l[0] != '%' {
			return n
		}
	}
	return 0
}
