package manifest

import (
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/tether-mcp/tether/controller/boundedfile"
	"github.com/tether-mcp/tether/spec"
)

// IgnoreFile excludes paths from a manifest tree, as Flux's .sourceignore
// does: in any directory of the tree, one glob (path.Match syntax) per line;
// blank lines and lines starting with # are skipped. A pattern without a
// slash matches a name at any depth below the file's directory; one with a
// slash matches the path relative to that directory; a trailing slash
// matches directories only. There is no negation. It lets a repository keep
// other YAML (Prometheus rules, kustomizations) beside its manifests.
const IgnoreFile = ".tetherignore"

type ignoreRule struct {
	base    string // directory of the .tetherignore
	pattern string
	dirOnly bool
	anchor  bool // pattern has a slash: match the relative path
}

// readIgnoreFile reads dir's ignore file, if any, under the limit of a
// manifest file: a FIFO, device or huge file there is an error naming it,
// never a hang or a read without end (docs/contract.md, Limits on files).
func readIgnoreFile(dir string) ([]ignoreRule, error) {
	data, _, err := boundedfile.Read(filepath.Join(dir, IgnoreFile), spec.MaxFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rules []ignoreRule
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{base: dir}
		if strings.HasSuffix(line, "/") {
			r.dirOnly = true
			line = strings.TrimRight(line, "/")
		}
		if strings.Contains(line, "/") {
			r.anchor = true
			line = strings.TrimPrefix(line, "/")
		}
		if _, err := path.Match(line, ""); err != nil || line == "" {
			continue // a malformed pattern excludes nothing
		}
		r.pattern = line
		rules = append(rules, r)
	}
	return rules, nil
}

func ignored(rules []ignoreRule, p string, isDir bool) bool {
	for _, r := range rules {
		if r.dirOnly && !isDir {
			continue
		}
		subject := filepath.Base(p)
		if r.anchor {
			rel, err := filepath.Rel(r.base, p)
			if err != nil {
				continue
			}
			subject = filepath.ToSlash(rel)
		}
		if ok, _ := path.Match(r.pattern, subject); ok {
			return true
		}
	}
	return false
}
