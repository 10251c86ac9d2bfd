package importer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/spec"
)

// Options say where an import comes from and where it goes.
type Options struct {
	// Source names the configuration in the manifests' header comments and
	// the report. Pass a base name: a full path is machine-specific, and
	// the manifests are meant to be committed.
	Source string
	// OutDir is the directory the manifests are written to; secrets go to
	// OutDir/secrets.
	OutDir string
}

// Plan is an import worked out in full before anything is written.
type Plan struct {
	Format  Format
	Source  string
	OutDir  string
	Servers []*Server
}

// SecretsDir is the directory, under the output directory, of the files
// that hold credentials.
const SecretsDir = "secrets"

// NewPlan parses a configuration and converts every server in it. A
// server that cannot be converted has Err set; the others are unaffected.
func NewPlan(data []byte, opts Options) (*Plan, error) {
	cfg, err := Parse(data)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(opts.OutDir)
	if err != nil {
		return nil, err
	}
	cv := &converter{cfg: cfg, secretsDir: filepath.Join(abs, SecretsDir)}
	p := &Plan{Format: cfg.Format, Source: opts.Source, OutDir: opts.OutDir}
	names := uniqueNames(cfg.Servers)
	for i, raw := range cfg.Servers {
		s := cv.convert(raw, names[i])
		if s.Err == nil {
			if _, err := s.render(p); err != nil {
				s.Err, s.Conn, s.Secrets = err, nil, nil
			}
		}
		p.Servers = append(p.Servers, s)
	}
	return p, nil
}

// ManifestPath is where a server's manifest goes.
func (p *Plan) ManifestPath(s *Server) string {
	return filepath.Join(p.OutDir, s.Name+".yaml")
}

// render returns the manifest file of s and checks it the way tether
// will read it: it must decode without error into the very spec intended
// (so that no YAML quirk changed a value on the way).
func (s *Server) render(p *Plan) ([]byte, error) {
	body, err := spec.RenderYAML(s.Conn)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Imported by `tether import` from %s (%q format), server %q.\n", p.Source, p.Format, s.Key)
	if len(s.Secrets) > 0 {
		fmt.Fprintf(&b, "# Credentials are read at connect time from files under %s/ (mode 0600).\n", SecretsDir)
	}
	for _, sec := range s.Secrets {
		if sec.NeedsValue {
			fmt.Fprintf(&b, "# Before use, write into %s: %s.\n", filepath.Join(SecretsDir, filepath.Base(sec.Path)), sec.Hint)
		}
	}
	b.Write(body)
	data := b.Bytes()
	path := p.ManifestPath(s)
	docs := spec.DecodeFile(path, data)
	if len(docs) != 1 || docs[0].Conn == nil {
		var msgs []string
		for _, d := range docs {
			for _, e := range d.Errors {
				msgs = append(msgs, e.Error())
			}
		}
		return nil, fmt.Errorf("the manifest would not be valid: %s", strings.Join(msgs, "; "))
	}
	want := s.Conn.DeepCopy()
	want.Default()
	if docs[0].Conn.Spec.Hash() != want.Spec.Hash() {
		return nil, errors.New("the manifest would not read back as written (please report this)")
	}
	return data, nil
}

// ConflictError lists what an import would overwrite or duplicate.
type ConflictError struct {
	Problems []string
}

func (e *ConflictError) Error() string {
	return "nothing written:\n  " + strings.Join(e.Problems, "\n  ")
}

// Write writes the manifests and secret files of every convertible server.
// Unless force is set it first checks that no manifest or secret file
// exists and writes nothing if one does (*ConflictError); with force it
// replaces them. A name that a manifest in another file of OutDir's tree
// declares is a conflict even with force: tether requires names unique
// across the tree. Each manifest is read back and validated after writing.
func (p *Plan) Write(force bool) error {
	if err := p.check(force); err != nil {
		return err
	}
	if err := os.MkdirAll(p.OutDir, 0o755); err != nil {
		return err
	}
	for _, s := range p.Servers {
		if s.Err != nil {
			continue
		}
		if err := p.writeServer(s, force); err != nil {
			return fmt.Errorf("%s: %w", s.Key, err)
		}
	}
	return nil
}

func (p *Plan) check(force bool) error {
	var problems []string
	declared, err := declaredNames(p.OutDir)
	if err != nil {
		return err
	}
	for _, s := range p.Servers {
		if s.Err != nil {
			continue
		}
		target := p.ManifestPath(s)
		if file, ok := declared[s.Name]; ok && filepath.Clean(file) != filepath.Clean(target) {
			problems = append(problems, fmt.Sprintf("%s: name %q is already declared in %s (names are unique across the tree)", s.Key, s.Name, file))
		}
		if force {
			continue
		}
		if exists(target) {
			problems = append(problems, fmt.Sprintf("%s exists (--force replaces it)", target))
		}
		for _, sec := range s.Secrets {
			if !sec.NeedsValue && exists(sec.Path) {
				problems = append(problems, fmt.Sprintf("%s exists (--force replaces it)", p.displaySecret(sec)))
			}
		}
	}
	if len(problems) > 0 {
		return &ConflictError{Problems: problems}
	}
	return nil
}

// declaredNames maps the names the manifests under dir declare to their
// files. A directory that does not exist declares none.
func declaredNames(dir string) (map[string]string, error) {
	out := map[string]string{}
	tree, err := manifest.ListTree(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, f := range tree.Files {
		docs, err := manifest.Decode(f)
		if err != nil {
			continue
		}
		for _, d := range docs {
			if d.Name != "" {
				if _, ok := out[d.Name]; !ok {
					out[d.Name] = f
				}
			}
		}
	}
	return out, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func (p *Plan) writeServer(s *Server, force bool) error {
	for _, sec := range s.Secrets {
		// Also for a value still to be written: the directory is then
		// ready, with the right mode, for the person who writes it.
		if err := ensureSecretsDir(filepath.Dir(sec.Path)); err != nil {
			return err
		}
		if sec.NeedsValue {
			continue
		}
		// The error names the file, never the value.
		if err := writeFile(sec.Path, []byte(sec.value), 0o600, force); err != nil {
			return err
		}
	}
	data, err := s.render(p)
	if err != nil {
		return err
	}
	path := p.ManifestPath(s)
	// A manifest that keeps a credential (s.Inline) is for its owner's eyes
	// only; the others are meant to be committed.
	perm := os.FileMode(0o644)
	if len(s.Inline) > 0 {
		perm = 0o600
	}
	if err := writeFile(path, data, perm, force); err != nil {
		return err
	}
	// What is on disk is what tether will read: check that, not the bytes
	// meant for it.
	back, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, d := range spec.DecodeFile(path, back) {
		if len(d.Errors) > 0 {
			return fmt.Errorf("written manifest is not valid: %v", d.Errors[0])
		}
	}
	return nil
}

// ensureSecretsDir creates the secrets directory with mode 0700, tightens
// an existing one to it, and puts a .gitignore in it so that committing
// the output directory leaves the secrets out.
func ensureSecretsDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	ignore := filepath.Join(dir, ".gitignore")
	if exists(ignore) {
		return nil
	}
	return os.WriteFile(ignore, []byte("# Written by tether import: these files hold credentials.\n*\n!.gitignore\n"), 0o644)
}

// writeFile writes data with mode perm. Without force it never replaces a
// file (O_EXCL, so a file created meanwhile is not overwritten either);
// with force it replaces atomically through a temp file and a rename.
func writeFile(path string, data []byte, perm os.FileMode, force bool) error {
	if !force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			return err
		}
		_, werr := f.Write(data)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return werr
		}
		return os.Chmod(path, perm) // umask may have taken bits away, never added
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(name, perm)
	}
	if werr == nil {
		werr = os.Rename(name, path)
	}
	if werr != nil {
		os.Remove(name)
	}
	return werr
}

// displaySecret is a secret's path as the user named the output directory.
func (p *Plan) displaySecret(sec Secret) string {
	return filepath.Join(p.OutDir, SecretsDir, filepath.Base(sec.Path))
}

// Failed reports whether a server could not be converted.
func (p *Plan) Failed() bool {
	for _, s := range p.Servers {
		if s.Err != nil {
			return true
		}
	}
	return false
}

// Report tells a person what the import did (or, with written false, would
// do): per server its manifest, its secret files, the values it still
// needs and its notes; then a summary. It names files and fields, never
// values.
func (p *Plan) Report(w io.Writer, written bool) error {
	var b strings.Builder
	verb := "would write"
	if written {
		verb = "wrote"
	}
	var manifests, secrets, needs, failed int
	for _, s := range p.Servers {
		if s.Err != nil {
			failed++
			fmt.Fprintf(&b, "%s: not imported: %v\n", s.Key, oneLine(s.Err))
			continue
		}
		manifests++
		fmt.Fprintf(&b, "%s: %s %s (%s)\n", s.Key, verb, p.ManifestPath(s), summary(s.Conn))
		for _, sec := range s.Secrets {
			if sec.NeedsValue {
				needs++
				fmt.Fprintf(&b, "  %s: NEEDS A VALUE in %s: %s\n", sec.Field, p.displaySecret(sec), sec.Hint)
				continue
			}
			secrets++
			where := "would go to"
			if written {
				where = "written to"
			}
			fmt.Fprintf(&b, "  %s: credential %s %s (mode 0600)\n", sec.Field, where, p.displaySecret(sec))
		}
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
	}
	fmt.Fprintf(&b, "%s %s and %s", capitalize(verb), plural(manifests, "manifest"), plural(secrets, "secret file"))
	if needs > 0 {
		fmt.Fprintf(&b, "; %s to write by hand (NEEDS A VALUE above)", plural(needs, "value"))
	}
	if failed > 0 {
		fmt.Fprintf(&b, "; %s not imported", plural(failed, "server"))
	}
	b.WriteString(".\n")
	if written && manifests > 0 {
		fmt.Fprintf(&b, "Check them with: tether validate %s\n", p.OutDir)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// summary says how a server is reached, without what may be a credential:
// a URL's password and query (?api_key=…) are left out.
func summary(c *spec.McpConnection) string {
	if c.Spec.Stdio != nil {
		if looksLikeCredential("", c.Spec.Stdio.Command) {
			return "stdio: (the command is not shown: it looks like a credential)"
		}
		return "stdio: " + c.Spec.Stdio.Command
	}
	parsed, err := url.Parse(c.Spec.HTTP.URL)
	if err != nil {
		return c.Spec.TransportName() + ": (a URL that does not parse)"
	}
	query := ""
	if parsed.RawQuery != "" || parsed.ForceQuery {
		query = "?…"
	}
	parsed.RawQuery, parsed.ForceQuery, parsed.Fragment, parsed.RawFragment = "", false, "", ""
	return c.Spec.TransportName() + ": " + parsed.Redacted() + query
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
