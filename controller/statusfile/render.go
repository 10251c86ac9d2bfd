package statusfile

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// render writes a status document as YAML, fields in the documented
// order. It is the status writer's hot path (every connection's every
// change), so it emits the fixed schema directly instead of going through a
// generic encoder (RenderYAML costs ~300 µs and ~200 KB a document; this a
// few µs). TestRenderStatusRoundTrip holds it to decoding back, strictly, to
// the same document.
func render(doc *spec.StatusDocument) []byte {
	var b bytes.Buffer
	b.Grow(1024)
	st := &doc.Status
	b.WriteString("apiVersion: ")
	scalar(&b, doc.APIVersion)
	b.WriteString("\nkind: ")
	scalar(&b, doc.Kind)
	b.WriteString("\nmetadata:\n  name: ")
	scalar(&b, doc.Metadata.Name)
	b.WriteString("\nstatus:\n  phase: ")
	scalar(&b, string(st.Phase))
	b.WriteByte('\n')
	if st.ObservedGeneration != 0 { // Kubernetes mode's; a file's status has none
		b.WriteString("  observedGeneration: ")
		b.WriteString(strconv.FormatInt(st.ObservedGeneration, 10))
		b.WriteByte('\n')
	}
	if st.ObservedSpecHash != "" {
		b.WriteString("  observedSpecHash: ")
		scalar(&b, st.ObservedSpecHash)
		b.WriteByte('\n')
	}
	if st.Conditions == nil {
		b.WriteString("  conditions: null\n")
	} else if len(st.Conditions) == 0 {
		b.WriteString("  conditions: []\n")
	} else {
		b.WriteString("  conditions:\n")
		for _, c := range st.Conditions {
			b.WriteString("    - type: ")
			scalar(&b, c.Type)
			b.WriteString("\n      status: ")
			scalar(&b, c.Status)
			b.WriteString("\n      reason: ")
			scalar(&b, c.Reason)
			b.WriteString("\n      message: ")
			scalar(&b, c.Message)
			b.WriteString("\n      lastTransitionTime: ")
			timestamp(&b, c.LastTransitionTime)
			b.WriteByte('\n')
		}
	}
	if s := st.Server; s != nil {
		b.WriteString("  server:\n    name: ")
		scalar(&b, s.Name)
		b.WriteString("\n    version: ")
		scalar(&b, s.Version)
		b.WriteString("\n    protocolVersion: ")
		scalar(&b, s.ProtocolVersion)
		b.WriteByte('\n')
	}
	counts(&b, "tools", st.Tools)
	counts(&b, "prompts", st.Prompts)
	counts(&b, "resources", st.Resources)
	counts(&b, "resourceTemplates", st.ResourceTemplates)
	if c := st.Catalog; c != nil {
		b.WriteString("  catalog:\n    hash: ")
		scalar(&b, c.Hash)
		b.WriteByte('\n')
		if c.ChangedTime != nil {
			b.WriteString("    changedTime: ")
			timestamp(&b, *c.ChangedTime)
			b.WriteByte('\n')
		}
		for _, l := range []struct {
			key   string
			names []string
		}{{"added", c.Added}, {"removed", c.Removed}} {
			if len(l.names) == 0 {
				continue
			}
			b.WriteString("    " + l.key + ":\n")
			for _, n := range l.names {
				b.WriteString("      - ")
				scalar(&b, n)
				b.WriteByte('\n')
			}
		}
	}
	b.WriteString("  attempt: ")
	b.WriteString(strconv.Itoa(st.Attempt))
	b.WriteString("\n  lastError: ")
	scalar(&b, st.LastError)
	b.WriteString("\n  nextRetryTime: ")
	if st.NextRetryTime == nil {
		b.WriteString("null")
	} else {
		timestamp(&b, *st.NextRetryTime)
	}
	b.WriteByte('\n')
	if st.ConnectedSince != nil {
		b.WriteString("  connectedSince: ")
		timestamp(&b, *st.ConnectedSince)
		b.WriteByte('\n')
	}
	if p := st.Process; p != nil {
		b.WriteString("  process:\n")
		if p.PID != 0 {
			b.WriteString("    pid: ")
			b.WriteString(strconv.Itoa(p.PID))
			b.WriteByte('\n')
		}
		if p.Container != "" {
			b.WriteString("    container: ")
			scalar(&b, p.Container)
			b.WriteByte('\n')
		}
		if p.Runtime != "" {
			b.WriteString("    runtime: ")
			scalar(&b, p.Runtime)
			b.WriteByte('\n')
		}
		b.WriteString("    restarts: ")
		b.WriteString(strconv.Itoa(p.Restarts))
		b.WriteByte('\n')
		if p.LastExitCode != nil {
			b.WriteString("    lastExitCode: ")
			b.WriteString(strconv.Itoa(*p.LastExitCode))
			b.WriteByte('\n')
		}
		if len(p.StderrTail) > 0 {
			b.WriteString("    stderrTail:\n")
			for _, l := range p.StderrTail {
				b.WriteString("      - ")
				scalar(&b, l)
				b.WriteByte('\n')
			}
		}
	}
	if st.Sandbox != "" {
		b.WriteString("  sandbox: ")
		scalar(&b, st.Sandbox)
		b.WriteByte('\n')
	}
	b.WriteString("  manifestError: ")
	scalar(&b, st.ManifestError)
	b.WriteByte('\n')
	if len(st.Collisions) > 0 {
		b.WriteString("  collisions:\n")
		for _, c := range st.Collisions {
			b.WriteString("    - tool: ")
			scalar(&b, c.Tool)
			b.WriteString("\n      connection: ")
			scalar(&b, c.Connection)
			b.WriteByte('\n')
			if c.Kept {
				b.WriteString("      kept: true\n")
			}
		}
	}
	if len(st.NameWarnings) > 0 {
		b.WriteString("  nameWarnings:\n")
		for _, w := range st.NameWarnings {
			b.WriteString("    - name: ")
			scalar(&b, w.Name)
			b.WriteString("\n      warning: ")
			scalar(&b, w.Warning)
			b.WriteByte('\n')
		}
	}
	// Kept for as long as the connection lives (Writer.rendered): a copy
	// of its exact size, not the buffer's doubled capacity.
	return bytes.Clone(b.Bytes())
}

// timestamp writes t as the quoted RFC 3339 string encoding/json gives it.
func timestamp(b *bytes.Buffer, t time.Time) {
	b.WriteByte('"')
	b.WriteString(t.Format(time.RFC3339Nano))
	b.WriteByte('"')
}

// scalar writes s plain when YAML reads that back as the same string, else
// as a JSON string (JSON's double-quoted strings are YAML's too).
func scalar(b *bytes.Buffer, s string) {
	if plainSafe(s) {
		b.WriteString(s)
		return
	}
	q, _ := json.Marshal(s) // a string always marshals
	b.Write(q)
}

// plainSafe is deliberately narrow: it starts with a letter, holds only
// letters, digits, spaces and a few punctuation marks, has no ": " or " #",
// does not end in a space or ':', and is no YAML 1.1 keyword (true, no, null…).
func plainSafe(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	c0 := s[0]
	if !(c0 >= 'a' && c0 <= 'z' || c0 >= 'A' && c0 <= 'Z') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == ' ' || c == '_' || c == '-' || c == '.' || c == '/' || c == '(' || c == ')' || c == '+' || c == '=' || c == '@':
		case c == ',' || c == ';':
		case c == ':':
			if i+1 == len(s) || s[i+1] == ' ' {
				return false
			}
		default:
			return false
		}
	}
	if s[len(s)-1] == ' ' || strings.Contains(s, " #") {
		return false
	}
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "true", "false", "on", "off", "null":
		return false
	}
	return true
}

// counts writes a status's counts of one kind, when it has them.
func counts(b *bytes.Buffer, key string, c *spec.Counts) {
	if c == nil {
		return
	}
	b.WriteString("  " + key + ":\n    count: ")
	b.WriteString(strconv.Itoa(c.Count))
	b.WriteString("\n    exposed: ")
	b.WriteString(strconv.Itoa(c.Exposed))
	b.WriteByte('\n')
}
