package statusfile

import (
	"bytes"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/tether-mcp/tether/controller/boundedfile"
	"github.com/tether-mcp/tether/spec"
)

// Read reads a status file into its documents by name, bounded by
// spec.MaxFileSize; a FIFO or device is refused, not read. A document that does not decode is skipped; the first
// such problem is returned with the others. A missing file is an error that errors.Is(err,
// fs.ErrNotExist) recognises: tether has not written it yet.
func Read(path string) (map[string]spec.StatusDocument, error) {
	data, _, err := boundedfile.Read(path, spec.MaxFileSize)
	if err != nil {
		return nil, err
	}
	docs := map[string]spec.StatusDocument{}
	var first error
	for i, raw := range SplitDocuments(data) {
		var doc spec.StatusDocument
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			if first == nil {
				first = fmt.Errorf("status document %d: %v", i+1, err)
			}
			continue
		}
		if doc.Metadata.Name != "" {
			docs[doc.Metadata.Name] = doc
		}
	}
	return docs, first
}

// SplitDocuments splits a status file on its "---" lines, the way Writer
// writes them.
func SplitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if len(bytes.TrimSpace(cur.Bytes())) > 0 {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if bytes.Equal(bytes.TrimRight(line, " \t\r\n"), []byte("---")) {
			flush()
			continue
		}
		cur.Write(line)
	}
	flush()
	return docs
}
