package diff

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/spec"
)

// ReadPaths reads the manifests that files and directories hold as tether
// run would read them (a directory as a tree, with .tetherignore; a file
// whatever its name), and "-" as one manifest file read from stdin: the
// tree dir is to hold. So each is named as in dir: a directory's files as
// the same places under dir, a file outside dir and stdin (stdin.yaml) as
// files of dir; a manifest's directory is where its relative paths resolve
// and part of what a session is kept for (spec.SessionKey). A file named
// twice is read once.
func ReadPaths(paths []string, stdin io.Reader, dir string) ([]manifest.File, error) {
	var files []manifest.File
	seen := map[string]bool{}
	add := func(f manifest.File) {
		if !seen[f.Path] {
			seen[f.Path] = true
			files = append(files, f)
		}
	}
	for _, p := range paths {
		if p == "-" {
			name := filepath.Join(dir, "stdin.yaml")
			data, err := io.ReadAll(io.LimitReader(stdin, spec.MaxFileSize+1))
			switch {
			case err != nil:
				return nil, fmt.Errorf("reading stdin: %w", err)
			case len(data) > spec.MaxFileSize:
				add(manifest.File{Path: name, Docs: spec.OversizedFile(name, int64(len(data)))})
			default:
				add(manifest.File{Path: name, Docs: manifest.DecodeData(name, data)})
			}
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, manifest.ErrorReason(err))
		}
		if !fi.IsDir() {
			add(manifest.LoadFileAs(p, inDir(p, dir)))
			continue
		}
		listed, _, err := manifest.ListFilesAs(p, filepath.Clean(dir))
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", p, err)
		}
		for _, f := range listed {
			add(f)
		}
	}
	return files, nil
}

// inDir names file p as a file of dir: itself when it is in dir already.
func inDir(p, dir string) string {
	ap, err1 := filepath.Abs(p)
	ad, err2 := filepath.Abs(dir)
	if err1 == nil && err2 == nil {
		if rel, err := filepath.Rel(ad, ap); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join(dir, rel)
		}
	}
	return filepath.Join(dir, filepath.Base(p))
}

// Limits of ReadRevision: how many bytes of manifests (each at most
// spec.MaxFileSize, the daemon's limit; a bigger one is not read) and how
// many manifest, .tetherignore and symlink entries it takes from a
// revision. Other files of the revision are never read.
const (
	MaxRevisionBytes = 256 << 20
	MaxRevisionFiles = 100000
	// maxTreeRecord bounds one record of git ls-tree (a path, an id, a
	// size): git's paths are far shorter.
	maxTreeRecord = 64 << 10
	// maxLinkTarget bounds a symlink's target (PATH_MAX).
	maxLinkTarget = 4096
)

// ReadRevision reads the manifest tree dir as it is at a git revision
// (a branch, tag, commit or origin/main), with the git binary, from the
// object store as committed: `git ls-tree` lists the revision's tree at
// dir's place in the repository and `git cat-file --batch` reads only the
// manifests, .tetherignore files and symlinks (never other files, and
// without .gitattributes' export rules, which git archive would apply).
// They are written, through an os.Root, into a temporary directory,
// listed there by the same rules (manifest.ListFilesAs), and named as the
// files of dir. A symlink is kept only when its target is relative and
// does not climb (no ..): one that leaves the tree would read, or let a
// later entry write, outside it. Nothing of the work tree changes.
func ReadRevision(ctx context.Context, dir, rev string) ([]manifest.File, error) {
	if strings.HasPrefix(rev, "-") {
		return nil, fmt.Errorf("--against %q: not a git revision", rev)
	}
	git := func(args ...string) ([]byte, error) {
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
	prefix, err := git("rev-parse", "--show-prefix")
	if err != nil {
		return nil, fmt.Errorf("%s is not in a git work tree: %w", dir, err)
	}
	top, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("%s is not in a git work tree: %w", dir, err)
	}
	commit, err := git("rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("--against %s: not a revision of the repository of %s", rev, dir)
	}
	tmp, err := os.MkdirTemp("", "tether-diff-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	r := revisionReader{ctx: ctx, top: strings.TrimSpace(string(top)), root: root}
	if err := r.read(strings.TrimSpace(string(commit)), strings.TrimSuffix(strings.TrimSpace(string(prefix)), "/")); err != nil {
		return nil, fmt.Errorf("reading %s at %s: %w", dir, rev, err)
	}
	files, _, err := manifest.ListFilesAs(tmp, filepath.Clean(dir))
	if err != nil {
		return nil, fmt.Errorf("listing %s at %s: %w", dir, rev, err)
	}
	return files, nil
}

type revisionReader struct {
	ctx  context.Context
	top  string
	root *os.Root
}

// treeEntry is a record of git ls-tree -l: what ReadRevision keeps of it.
type treeEntry struct {
	rel  string // its path under the manifest directory, slash-separated
	oid  string
	size int64
	link bool
}

// read writes the revision's manifest directory prefix (of commit) under
// r.root.
func (r revisionReader) read(commit, prefix string) error {
	args := []string{"-C", r.top, "ls-tree", "-r", "-l", "-z", commit}
	if prefix != "" {
		args = append(args, "--", prefix)
	}
	cmd := exec.CommandContext(r.ctx, "git", args...)
	// A directory named with * or ? is that directory, not a pattern.
	cmd.Env = append(os.Environ(), "GIT_LITERAL_PATHSPECS=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git ls-tree: %w", err)
	}
	entries, lerr := listEntries(bufio.NewReaderSize(out, maxTreeRecord), prefix)
	if lerr != nil {
		_ = cmd.Process.Kill()
	}
	werr := cmd.Wait()
	switch {
	case lerr != nil:
		return lerr
	case werr != nil:
		return fmt.Errorf("git ls-tree: %w: %s", werr, strings.TrimSpace(stderr.String()))
	case len(entries) == 0:
		return nil // the directory did not exist at that revision: it held nothing
	}
	return r.write(entries)
}

// listEntries parses git ls-tree -r -l -z: the blobs under prefix that the
// listing reads (manifests, .tetherignore) and the symlinks.
func listEntries(br *bufio.Reader, prefix string) ([]treeEntry, error) {
	var entries []treeEntry
	for {
		rec, err := br.ReadSlice(0)
		if errors.Is(err, io.EOF) && len(rec) == 0 {
			return entries, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("git ls-tree: a record over %d bytes", maxTreeRecord)
		}
		if err != nil {
			return nil, fmt.Errorf("git ls-tree: %w", err)
		}
		meta, path, ok := strings.Cut(string(rec[:len(rec)-1]), "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 4 {
			return nil, fmt.Errorf("git ls-tree: unexpected record %q", meta)
		}
		rel := path
		if prefix != "" {
			if rel, ok = strings.CutPrefix(path, prefix+"/"); !ok {
				continue // the prefix itself, a file at that revision
			}
		}
		mode, typ := f[0], f[1]
		base := rel[strings.LastIndexByte(rel, '/')+1:]
		link := mode == "120000"
		keep := typ == "blob" && (link || (mode == "100644" || mode == "100755") && (manifest.IsManifestName(base) || base == manifest.IgnoreFile))
		if !keep {
			continue
		}
		size, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("git ls-tree: unexpected size in %q", meta)
		}
		if len(entries) >= MaxRevisionFiles {
			return nil, fmt.Errorf("more than %d manifests, %s files and symlinks (the limit of --against)", MaxRevisionFiles, manifest.IgnoreFile)
		}
		entries = append(entries, treeEntry{rel: rel, oid: f[2], size: size, link: link})
	}
}

// write reads the entries' blobs with one git cat-file --batch and writes
// them under r.root: a manifest over spec.MaxFileSize as a sparse file of
// its size (so reading it reports its size as tether run would), a
// symlink only when it stays in the tree.
func (r revisionReader) write(entries []treeEntry) error {
	var want []treeEntry
	var total int64
	for _, e := range entries {
		switch {
		case e.link && e.size > maxLinkTarget:
			continue // no path is that long: it cannot point in the tree
		case e.link:
		case e.size > spec.MaxFileSize:
			if err := r.create(e.rel, func(f *os.File) error { return f.Truncate(e.size) }); err != nil {
				return err
			}
			continue
		default:
			if total += e.size; total > MaxRevisionBytes {
				return fmt.Errorf("the manifests add up to more than %d bytes (the limit of --against)", MaxRevisionBytes)
			}
		}
		want = append(want, e)
	}
	if len(want) == 0 {
		return nil
	}
	cmd := exec.CommandContext(r.ctx, "git", "-C", r.top, "cat-file", "--batch")
	var in bytes.Buffer
	for _, e := range want {
		in.WriteString(e.oid + "\n")
	}
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git cat-file: %w", err)
	}
	xerr := r.copyBlobs(bufio.NewReader(out), want)
	if xerr != nil {
		_ = cmd.Process.Kill()
	}
	werr := cmd.Wait()
	switch {
	case xerr != nil:
		return xerr
	case werr != nil:
		return fmt.Errorf("git cat-file: %w: %s", werr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// copyBlobs reads git cat-file --batch's answers, in the order of want.
func (r revisionReader) copyBlobs(br *bufio.Reader, want []treeEntry) error {
	for _, e := range want {
		head, err := br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("git cat-file: %w", err)
		}
		f := strings.Fields(head)
		if len(f) != 3 || f[0] != e.oid || f[1] != "blob" {
			return fmt.Errorf("git cat-file: unexpected answer %q for %s", strings.TrimSpace(head), e.rel)
		}
		// The size ls-tree gave bounds what is read: the object store
		// cannot make a blob bigger than it said.
		if size, err := strconv.ParseInt(f[2], 10, 64); err != nil || size != e.size {
			return fmt.Errorf("git cat-file: size %s of %s, ls-tree said %d", f[2], e.rel, e.size)
		}
		body := io.LimitReader(br, e.size)
		if e.link {
			target, err := io.ReadAll(body)
			if err != nil {
				return fmt.Errorf("git cat-file: %w", err)
			}
			if err := r.symlink(e.rel, string(target)); err != nil {
				return err
			}
		} else if err := r.create(e.rel, func(f *os.File) error {
			n, err := io.Copy(f, body)
			if err == nil && n != e.size {
				err = io.ErrUnexpectedEOF
			}
			return err
		}); err != nil {
			return err
		}
		if _, err := br.Discard(1); err != nil { // the newline after each blob
			return fmt.Errorf("git cat-file: %w", err)
		}
	}
	return nil
}

// create writes the regular file rel under r.root (its directories made),
// refusing to follow a symlink out of it.
func (r revisionReader) create(rel string, fill func(*os.File) error) error {
	name := filepath.FromSlash(rel)
	if d := filepath.Dir(name); d != "." {
		if err := r.root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	f, err := r.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = fill(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// symlink makes the symlink rel → target under r.root when target is
// relative and does not climb: resolved from its own directory it then
// stays under it, whatever other links it goes through.
func (r revisionReader) symlink(rel, target string) error {
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) || slices.Contains(strings.Split(target, "/"), "..") {
		return nil
	}
	name := filepath.FromSlash(rel)
	if d := filepath.Dir(name); d != "." {
		if err := r.root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := r.root.Symlink(filepath.FromSlash(target), name); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}
