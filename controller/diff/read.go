package diff

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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

// MaxArchiveBytes bounds what ReadRevision takes from git archive: the
// revision's copy of the manifest directory, every file of it (manifests
// are read at most spec.MaxFileSize each; others are not written).
const MaxArchiveBytes = 256 << 20

// ReadRevision reads the manifest tree dir as it is at a git revision
// (a branch, tag, commit or origin/main), with the git binary: `git
// archive` of the revision's tree at dir's place in the repository, into a
// temporary directory, listed there by the same rules (manifest.ListFilesAs),
// and named as the files of dir. Nothing of the work tree changes.
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
	if _, err := git("rev-parse", "--verify", "--quiet", rev+"^{commit}"); err != nil {
		return nil, fmt.Errorf("--against %s: not a revision of the repository of %s", rev, dir)
	}
	tmp, err := os.MkdirTemp("", "tether-diff-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	treeish := rev + ":" + strings.TrimSuffix(strings.TrimSpace(string(prefix)), "/")
	// From the top: in a subdirectory, git archive keeps only that
	// subdirectory's path of the tree it is given.
	cmd := exec.CommandContext(ctx, "git", "-C", strings.TrimSpace(string(top)), "archive", "--format=tar", treeish)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git archive: %w", err)
	}
	xerr := extract(io.LimitReader(out, MaxArchiveBytes+1), tmp)
	if xerr != nil {
		_ = cmd.Process.Kill()
	}
	werr := cmd.Wait()
	switch {
	case xerr != nil:
		return nil, fmt.Errorf("reading %s at %s: %w", dir, rev, xerr)
	case werr != nil:
		// The directory did not exist at that revision: it held nothing.
		if strings.Contains(stderr.String(), "not a valid object name") || strings.Contains(stderr.String(), "not a tree object") {
			return nil, nil
		}
		return nil, fmt.Errorf("git archive %s: %w: %s", treeish, werr, strings.TrimSpace(stderr.String()))
	}
	files, _, err := manifest.ListFilesAs(tmp, filepath.Clean(dir))
	if err != nil {
		return nil, fmt.Errorf("listing %s at %s: %w", dir, rev, err)
	}
	return files, nil
}

// extract writes a tar stream's directories, regular files and symlinks
// under root (as a checkout would hold them). A manifest over
// spec.MaxFileSize is not copied: a sparse file of its size stands in, so
// reading it reports its size as tether run would, and a non-manifest
// file is written empty (only its name matters to the listing).
func extract(r io.Reader, root string) error {
	tr := tar.NewReader(r)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if name == "." || filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			continue
		}
		p := filepath.Join(root, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			keep := manifest.IsManifestName(filepath.Base(p)) || filepath.Base(p) == ".tetherignore"
			if keep && h.Size <= spec.MaxFileSize {
				total += h.Size
				if total > MaxArchiveBytes {
					f.Close()
					return fmt.Errorf("the manifests add up to more than %d bytes", MaxArchiveBytes)
				}
				_, err = io.Copy(f, io.LimitReader(tr, h.Size))
			} else if keep {
				err = f.Truncate(h.Size)
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
