package manifest

import (
	"os"
	"path"
	"path/filepath"
	"strings"
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

func readIgnoreFile(dir string) []ignoreRule {
	data, err := os.ReadFile(filepath.Join(dir, IgnoreFile))
	if err != nil {
		return nil
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
	return rules
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
