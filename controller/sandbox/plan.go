package sandbox

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tether-mcp/tether/spec"
)

// LauncherArg is tether's hidden first argument that makes it the launcher
// (cmd/tether handles it before its command line is parsed).
const LauncherArg = "__tether-sandbox-launch"

// PlanEnv carries the plan, as JSON, from tether to the launcher; the
// launcher removes it from the environment the server gets.
const PlanEnv = "TETHER_SANDBOX_PLAN"

// Rights of a path in a plan.
const (
	RightRead    = "r"   // read files, list directories
	RightExec    = "rx"  // read and execute
	RightWrite   = "rw"  // read, write, create, remove
	RightWriteX  = "rwx" // read, write and execute (the private temporary directory is rw only)
	RightDevice  = "dev" // read and write a device file (no ioctl beyond the kernel's common ones)
	maxLibraries = 512   // a bound on the shared-library walk
	// maxInterpBytes bounds an ELF program's PT_INTERP (the loader's path,
	// PATH_MAX at most); a larger one is not read.
	maxInterpBytes = 4096
)

// PathRule is one path and the rights the server has beneath it.
type PathRule struct {
	Path   string `json:"path"`
	Rights string `json:"rights"`
}

// Limits are setrlimit values; 0 is unset.
type Limits struct {
	Memory    uint64 `json:"memory,omitempty"`
	Processes uint64 `json:"processes,omitempty"`
	OpenFiles uint64 `json:"openFiles,omitempty"`
}

// Plan is a policy resolved for one start of one server: what the launcher
// applies. It holds paths and ports, never a secret.
type Plan struct {
	Paths []PathRule `json:"paths"`
	// Network is the spec's mode; Namespace says the launcher runs in a
	// network namespace of its own (none, loopback), LoopbackUp that it
	// brings that namespace's lo up (loopback).
	Network    string `json:"network"`
	Namespace  bool   `json:"namespace,omitempty"`
	LoopbackUp bool   `json:"loopbackUp,omitempty"`
	// HandleTCP restricts TCP bind and connect to ConnectTCP; HandleUDP
	// restricts UDP to ConnectUDP (a kernel with Landlock ABI 10).
	HandleTCP  bool     `json:"handleTCP,omitempty"`
	ConnectTCP []uint16 `json:"connectTCP,omitempty"`
	HandleUDP  bool     `json:"handleUDP,omitempty"`
	ConnectUDP []uint16 `json:"connectUDP,omitempty"`
	Limits     Limits   `json:"limits"`
	// Tmp is the private temporary directory (TMPDIR), "" when not granted.
	Tmp string `json:"tmp,omitempty"`
	// Hosts are the connect entries with a host, which Landlock cannot
	// hold to their host (Check reports them).
	Hosts []string `json:"hosts,omitempty"`
	// BestEffort is the spec's.
	BestEffort bool `json:"bestEffort,omitempty"`
}

// Encode is the plan as PlanEnv carries it.
func (p *Plan) Encode() (string, error) {
	b, err := json.Marshal(p)
	return string(b), err
}

// Inputs is what a plan is resolved against.
type Inputs struct {
	Command     string // the resolved program
	WorkingDir  string // spec.stdio.workingDir, resolved; "" when the manifest sets none
	ManifestDir string // relative policy paths resolve against it
	Home        string // ~/ expands to it: the server's HOME
	Path        string // the child's PATH (what /usr/bin/env looks up)
	Tmp         string // the private temporary directory, made by the caller
	// Origin names the policy in errors when it is not the manifest's
	// spec.stdio.sandbox: "--default-sandbox FILE".
	Origin string
	// Protected are what a server must not write, named: tether's
	// executable (the launcher, which runs unconfined), the manifest's
	// directory (a manifest there runs unconfined), the state directory;
	// and what it must not read either: the state directory (OAuth
	// tokens, other servers' TMPDIRs).
	Protected []Protected
}

// Protected is a path no write grant may hold (nor, with Read, any grant),
// and what it is. With Tree, no write grant may lie in it either but
// beneath a hidden name (.data): tether reads the manifests of every
// subdirectory whose name is not hidden.
type Protected struct {
	Path, What string
	Read, Tree bool
}

// InTree reports whether path lies in the manifest tree at dir (both
// resolved and clean): beneath it, with no hidden name on the way, which
// tether's walk of the tree skips.
func InTree(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return false
	}
	for _, name := range strings.Split(rel, string(filepath.Separator)) {
		if strings.HasPrefix(name, ".") && name != "." {
			return false
		}
	}
	return true
}

// Build resolves policy for one start. A listed path that does not exist is
// an error naming the field, retried (it may be made); the named grants skip
// what is missing. A policy tether will not run (a grant reaching what it
// protects, or a field validation refuses) is a RefusedError: held until
// the spec changes, unless it holds only through a symbolic link (Linked),
// which may change.
func Build(policy *spec.SandboxSpec, in Inputs) (*Plan, error) {
	p := &Plan{Network: policy.NetworkMode(), BestEffort: policy.BestEffort}
	field := func(name string) string { return PolicyField(in.Origin, name) }
	var from []string // where each of p.Paths comes from, for errors
	add := func(path, rights, origin string) {
		p.Paths = append(p.Paths, PathRule{Path: path, Rights: rights})
		from = append(from, origin)
	}
	if policy.Granted(spec.GrantCommand) {
		add(in.Command, RightExec, "the command (grants: command)")
	}
	var programs []string // ELF files whose libraries are granted
	programs = append(programs, in.Command)
	if policy.Granted(spec.GrantInterpreter) {
		for _, interp := range interpreters(in.Command, in.Path) {
			add(interp, RightExec, "the interpreter (grants: interpreter)")
			programs = append(programs, interp)
		}
	}
	if policy.Granted(spec.GrantLibraries) {
		for _, lib := range libraries(programs) {
			add(lib, RightExec, "a library (grants: libraries)")
		}
	}
	if policy.Granted(spec.GrantWorkingDir) && in.WorkingDir != "" {
		add(in.WorkingDir, RightRead, "workingDir (grants: workingDir)")
	}
	if policy.Granted(spec.GrantTmp) && in.Tmp != "" {
		p.Tmp = in.Tmp
		add(in.Tmp, RightWrite, "TMPDIR (grants: tmp)")
	}
	if policy.Granted(spec.GrantDevices) {
		for _, d := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"} {
			if _, err := os.Stat(d); err == nil {
				add(d, RightDevice, "a device (grants: devices)")
			}
		}
	}
	for _, list := range []struct {
		field  string
		paths  []string
		rights string
	}{{"read", policy.Read, RightRead}, {"write", policy.Write, RightWrite}, {"execute", policy.Execute, RightExec}} {
		for i, raw := range list.paths {
			path := expand(raw, in.Home, in.ManifestDir)
			if _, err := os.Stat(path); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", field(fmt.Sprintf("%s[%d]", list.field, i)), path, errors.Unwrap(err))
			}
			add(path, list.rights, field(fmt.Sprintf("%s[%d]", list.field, i)))
		}
	}
	switch p.Network {
	case spec.NetworkNone:
		p.Namespace = true
	case spec.NetworkLoopback:
		p.Namespace, p.LoopbackUp = true, true
	case spec.NetworkConnect:
		p.HandleTCP, p.HandleUDP = true, true
		for i, c := range policy.Connect {
			r, err := spec.ParseConnect(c)
			if err != nil {
				// Validation refused it already; a spec that came past it
				// is refused, not retried.
				return nil, &RefusedError{Field: field(fmt.Sprintf("connect[%d]", i)), Problem: err.Error()}
			}
			if r.Host != "" {
				p.Hosts = append(p.Hosts, c)
			}
			if !slices.Contains(p.ConnectTCP, r.Port) {
				p.ConnectTCP = append(p.ConnectTCP, r.Port)
			}
		}
		if policy.DNS {
			p.ConnectTCP = append(p.ConnectTCP, 53)
			p.ConnectUDP = append(p.ConnectUDP, 53)
			for _, f := range []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/host.conf"} {
				if _, err := os.Stat(f); err == nil {
					add(f, RightRead, "a resolver file (dns)")
				}
			}
		}
	}
	if err := holdsNone(p.Paths, from, in.Protected, p.Tmp); err != nil {
		return nil, err
	}
	if err := noWayOut(p.Paths, from); err != nil {
		return nil, err
	}
	if l := policy.Limits; l != nil {
		if l.Memory != "" {
			m, err := spec.ParseMemory(l.Memory)
			if err != nil {
				return nil, &RefusedError{Field: field("limits.memory"), Problem: err.Error()}
			}
			p.Limits.Memory = m
		}
		if l.Processes != nil {
			p.Limits.Processes = uint64(*l.Processes)
		}
		if l.OpenFiles != nil {
			p.Limits.OpenFiles = uint64(*l.OpenFiles)
		}
	}
	return p, nil
}

// PolicyField is how an error names a field of a policy: name within the
// manifest's spec.stdio.sandbox when origin is "" (name "" is the policy
// itself), else within origin ("--default-sandbox FILE: write[0]"), since
// the manifest holds no such field then.
func PolicyField(origin, name string) string {
	switch {
	case origin == "" && name == "":
		return "spec.stdio.sandbox"
	case origin == "":
		return "spec.stdio.sandbox." + name
	case name == "":
		return origin
	}
	return origin + ": " + name
}

// holdsNone refuses a write grant that holds (is, or is a parent of) a
// protected path: through it the server could change what tether runs
// next, unconfined; and any grant that holds one protected from reading,
// or lies in it (read: [.tether/oauth]), but the server's own TMPDIR (tmp,
// in the state directory's sandbox-tmp/). Both sides are compared with
// their symbolic links resolved.
func holdsNone(paths []PathRule, from []string, protected []Protected, tmp string) error {
	for i, r := range paths {
		writing := r.Rights == RightWrite || r.Rights == RightWriteX
		for _, p := range protected {
			if p.Path == "" || !writing && !p.Read {
				continue
			}
			problem := reaches(resolved(r.Path), resolved(p.Path), r, p, writing, tmp)
			if problem == "" {
				continue
			}
			// Held until the spec changes only when the paths as written
			// reach it: through a symbolic link (the grant's, or one in the
			// manifest tree), which can change without a new spec, it is
			// retried.
			linked := reaches(lexical(r.Path), lexical(p.Path), r, p, writing, tmp) == ""
			return &RefusedError{Field: from[i], Path: r.Path, Problem: problem, Linked: linked}
		}
	}
	return nil
}

// reaches is what is wrong with grant r, at g, for protected p, at pp: ""
// when nothing is.
func reaches(g, pp string, r PathRule, p Protected, writing bool, tmp string) string {
	if !beneath(pp, g) {
		if p.Read && r.Path != tmp && beneath(g, pp) {
			return fmt.Sprintf("is in %s (%s), whose OAuth tokens and other servers' files a server must not read", p.What, p.Path)
		}
		if writing && p.Tree && InTree(g, pp) {
			return fmt.Sprintf("is in %s (%s), whose manifests tether reads: one the server wrote there would run unconfined; grant a directory beside it, or beneath a hidden name (.data), which tether does not read", p.What, p.Path)
		}
		return ""
	}
	if writing {
		return fmt.Sprintf("holds %s (%s): a server that may write there could change what tether runs, unconfined; grant a directory beside it", p.What, p.Path)
	}
	return fmt.Sprintf("holds %s (%s), whose OAuth tokens and other servers' files a server must not read; grant a directory beside it", p.What, p.Path)
}

// lexical is path made absolute and clean, its symbolic links left as
// they are.
func lexical(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return filepath.Clean(path)
}

// noWayOut refuses a path that lies beneath a write grant but resolves,
// through a symbolic link, outside it: the server may make that link
// before its next start (read: [~/work/config] with write: [~/work], config
// turned into a link to ~/.ssh), and the kernel's rule follows it.
func noWayOut(paths []PathRule, from []string) error {
	for _, w := range paths {
		if w.Rights != RightWrite && w.Rights != RightWriteX {
			continue
		}
		wr := resolved(w.Path)
		for i, r := range paths {
			if r.Path == w.Path || !beneath(r.Path, w.Path) {
				continue
			}
			if rr := resolved(r.Path); !beneath(rr, wr) {
				// Retried: removing the link clears it, with no new spec.
				return &RefusedError{Field: from[i], Path: r.Path, Linked: true,
					Problem: fmt.Sprintf("is beneath the write grant %s but resolves to %s, outside it: a server could point it anywhere before its next start; grant %s by its own path", w.Path, rr, rr)}
			}
		}
	}
	return nil
}

// beneath reports whether path is dir or lies below it (both clean).
func beneath(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// resolved is path with its symbolic links resolved, or cleaned when that
// fails.
func resolved(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return filepath.Clean(path)
}

// expand makes a policy path absolute: ~/ is home, a relative path is
// beneath the manifest's directory.
func expand(path, home, manifestDir string) string {
	switch {
	case path == "~":
		return home
	case strings.HasPrefix(path, "~/"):
		return filepath.Join(home, path[2:])
	case !filepath.IsAbs(path):
		return filepath.Join(manifestDir, path)
	}
	return filepath.Clean(path)
}

// interpreters are the programs a script's #! line runs: the interpreter,
// and for /usr/bin/env the program it looks up on path.
func interpreters(command, path string) []string {
	interp, arg := shebang(command)
	if !isELF(interp) {
		return nil
	}
	out := []string{interp}
	if filepath.Base(interp) == "env" {
		fields := strings.Fields(arg)
		for len(fields) > 0 && strings.HasPrefix(fields[0], "-") {
			fields = fields[1:] // env -S node: the options before the program
		}
		if len(fields) > 0 {
			if prog := lookPath(fields[0], path); isELF(prog) {
				out = append(out, prog)
			}
		}
	}
	return out
}

// isELF reports whether path is absolute and names an ELF file. What the
// interpreter and libraries grants add is read from files a server may be
// able to write (its own script, beneath a write grant): a #! line or a
// DT_NEEDED naming ~/.ssh/id_ed25519 must not grant it at the next start,
// so only what could be an interpreter or a library is granted.
func isELF(path string) bool {
	if !filepath.IsAbs(path) {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == elf.ELFMAG
}

// shebang reads a script's #! line: the interpreter and the rest.
func shebang(file string) (interp, arg string) {
	f, err := os.Open(file)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	buf := make([]byte, 256) // the kernel reads no more of a #! line
	n, _ := f.Read(buf)
	line, ok := bytes.CutPrefix(buf[:n], []byte("#!"))
	if !ok {
		return "", ""
	}
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	interp, arg, _ = strings.Cut(strings.TrimSpace(string(line)), " ")
	return interp, strings.TrimSpace(arg)
}

// lookPath finds name in the directories of path, as env does.
func lookPath(name, path string) string {
	if strings.Contains(name, "/") {
		return name
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		c := filepath.Join(dir, name)
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return c
		}
	}
	return ""
}

// libraries are the shared libraries the ELF programs load, and those
// libraries' own, as the dynamic loader finds them: the program's
// interpreter (ld.so), DT_RUNPATH/DT_RPATH ($ORIGIN too), then the
// directories of /etc/ld.so.conf and the defaults; and /etc/ld.so.cache.
func libraries(programs []string) []string {
	var out []string
	seen := map[string]bool{}
	dirs := systemLibraryDirs()
	queue := slices.Clone(programs)
	for len(queue) > 0 && len(out) < maxLibraries {
		file := queue[0]
		queue = queue[1:]
		f, err := elf.Open(file)
		if err != nil {
			continue // a script, or not readable: nothing to load
		}
		var search []string
		for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
			vals, _ := f.DynString(tag)
			for _, v := range vals {
				for _, d := range filepath.SplitList(v) {
					search = append(search, strings.ReplaceAll(d, "$ORIGIN", filepath.Dir(file)))
				}
			}
		}
		search = append(search, dirs...)
		var found []string
		for _, prog := range f.Progs {
			// A loader's path is at most PATH_MAX: a larger size is a
			// hostile header (a server's own program beneath its write
			// grant), not an allocation for tether to make.
			if prog.Type == elf.PT_INTERP && prog.Filesz <= maxInterpBytes {
				b := make([]byte, prog.Filesz)
				if _, err := prog.ReadAt(b, 0); err == nil {
					found = append(found, string(bytes.TrimRight(b, "\x00")))
				}
			}
		}
		needed, _ := f.ImportedLibraries()
		_ = f.Close()
		for _, lib := range needed {
			for _, d := range search {
				c := filepath.Join(d, lib)
				if _, err := os.Stat(c); err == nil {
					found = append(found, c)
					break
				}
			}
		}
		for _, lib := range found {
			if real, err := filepath.EvalSymlinks(lib); err == nil && !seen[real] && isELF(real) {
				seen[real] = true
				out = append(out, real)
				queue = append(queue, real)
			}
		}
	}
	if len(out) > 0 {
		if _, err := os.Stat("/etc/ld.so.cache"); err == nil {
			out = append(out, "/etc/ld.so.cache")
		}
	}
	return out
}

// systemLibraryDirs are the dynamic loader's directories: those of
// /etc/ld.so.conf (and the files it includes), then its defaults.
func systemLibraryDirs() []string { return libraryDirs("/etc/ld.so.conf") }

// libraryDirs reads the ld.so.conf at conf, its includes to a depth of 4
// (a file that includes itself ends there), then adds the defaults.
func libraryDirs(conf string) []string {
	var dirs []string
	var read func(file string, depth int)
	read = func(file string, depth int) {
		b, err := os.ReadFile(file)
		if err != nil || depth > 4 {
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			if inc, ok := strings.CutPrefix(line, "include "); ok {
				matches, _ := filepath.Glob(strings.TrimSpace(inc))
				for _, m := range matches {
					read(m, depth+1)
				}
				continue
			}
			if filepath.IsAbs(line) {
				dirs = append(dirs, line)
			}
		}
	}
	read(conf, 0)
	dirs = slices.Compact(dirs) // a file that includes itself adds its directories once
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

// Describe is status.sandbox for the plan on a kernel with Landlock ABI
// abi: "landlock fs+net", "landlock fs+netns none", "landlock fs" (network
// all), with " (best effort)" when Check found something missing; without
// Landlock at all (best effort) only the namespace and no-new-privileges
// remain, and it says so.
func (p *Plan) Describe(missing []string, abi int) string {
	var s string
	switch p.Network {
	case spec.NetworkNone, spec.NetworkLoopback:
		s = "landlock fs+netns " + p.Network
	case spec.NetworkConnect:
		s = "landlock fs+net"
	default:
		s = "landlock fs"
	}
	if abi < 1 {
		s = "no-new-privileges, no landlock"
		if p.Namespace {
			s = "netns " + p.Network + ", " + s
		}
	}
	if len(missing) > 0 {
		s += " (best effort)"
	}
	return s
}
