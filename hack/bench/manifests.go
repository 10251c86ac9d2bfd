//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tether-mcp/tether/spec"
)

// manifest is one McpConnection the harness writes.
type manifest struct {
	name    string
	command string // stdio command, or
	url     string // streamable HTTP endpoint
	// extra is appended to spec: (already indented by two spaces).
	extra string
	// stdioExtra is appended to spec.stdio: (indented by four spaces).
	stdioExtra string
}

func (m manifest) yaml() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: %s\nspec:\n", m.name)
	if m.command != "" {
		fmt.Fprintf(&b, "  stdio:\n    command: %s\n%s", m.command, m.stdioExtra)
	} else {
		fmt.Fprintf(&b, "  http:\n    url: %s\n", m.url)
	}
	b.WriteString(m.extra)
	return []byte(b.String())
}

func (m manifest) path(dir string) string { return filepath.Join(dir, m.name+".yaml") }

// write writes the manifest in place (truncate, then write), as most
// editors and scripts do, and returns its status file's path.
func (m manifest) write(dir string) (string, error) {
	p := m.path(dir)
	return statusPath(p), os.WriteFile(p, m.yaml(), 0o644)
}

// hash is the observedSpecHash tether reports once it has read m.
func (m manifest) hash() (string, error) {
	docs := spec.DecodeFile(m.name+".yaml", m.yaml())
	if len(docs) != 1 || docs[0].Conn == nil {
		return "", fmt.Errorf("manifest %s does not decode: %+v", m.name, docs)
	}
	return docs[0].Conn.Spec.Hash(), nil
}

func writeAll(dir string, ms []manifest) ([]string, error) {
	paths := make([]string, 0, len(ms))
	for _, m := range ms {
		p, err := m.write(dir)
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// httpManifests declares n streamable HTTP connections spread round-robin
// over the backends.
func httpManifests(n int, backends []*backend) []manifest {
	ms := make([]manifest, n)
	for i := range ms {
		ms[i] = manifest{name: fmt.Sprintf("h-%04d", i), url: backends[i%len(backends)].url()}
	}
	return ms
}

func stdioManifests(n int, command string) []manifest {
	ms := make([]manifest, n)
	for i := range ms {
		ms[i] = manifest{name: fmt.Sprintf("s-%04d", i), command: command}
	}
	return ms
}
