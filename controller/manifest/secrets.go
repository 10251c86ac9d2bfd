package manifest

import (
	"fmt"

	"github.com/tether-mcp/tether/spec"
)

// RejectSecretKeyRefs makes every valid document that reads a Secret
// (valueFrom.secretKeyRef) invalid, with an error that names the field: only
// Kubernetes mode reads Secrets, and a manifest tree has none. tether run
// --dir applies it; tether validate does not, because the same file may be
// meant for a cluster. It returns docs, changed in place.
func RejectSecretKeyRefs(file string, docs []spec.Document) []spec.Document {
	for i := range docs {
		d := &docs[i]
		if d.Conn == nil {
			continue
		}
		var errs []*spec.FieldError
		check := func(list string, vars []spec.EnvVar) {
			for j, v := range vars {
				if v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil {
					errs = append(errs, &spec.FieldError{
						File: file, Index: d.Index, Line: d.Line, DocLine: d.Line,
						Field: fmt.Sprintf("%s[%d].valueFrom.secretKeyRef", list, j),
						Msg:   "a Secret can be read only in Kubernetes mode (tether run --kubernetes); in a manifest directory use valueFrom.file",
					})
				}
			}
		}
		if s := d.Conn.Spec.Stdio; s != nil {
			check("spec.stdio.env", s.Env)
		}
		if h := d.Conn.Spec.HTTP; h != nil {
			check("spec.http.headers", h.Headers)
		}
		if c := d.Conn.Spec.Container; c != nil {
			check("spec.container.env", c.Env)
			check("spec.container.secretFiles", c.SecretFiles)
		}
		if len(errs) > 0 {
			d.Conn, d.Errors = nil, errs
		}
	}
	return docs
}
