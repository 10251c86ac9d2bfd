//go:build linux

package sandbox

import (
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/spec"
)

func rightsOf(p *Plan, path string) string {
	for _, r := range p.Paths {
		if r.Path == path {
			return r.Rights
		}
	}
	return ""
}

// script writes an executable #! script that runs interp.
func script(t *testing.T, line string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(f, []byte(line+"\nconsole.log(1)\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestBuildGrantsByName: the command, its #! interpreter and what
// /usr/bin/env runs, their shared libraries (as the dynamic loader finds
// them), the workingDir the manifest sets, the TMPDIR and the devices.
func TestBuildGrantsByName(t *testing.T) {
	bin := t.TempDir()
	prog := filepath.Join(bin, "prog")
	env, err := os.ReadFile("/usr/bin/env") // a dynamically linked ELF program
	if err != nil {
		t.Skip("no /usr/bin/env")
	}
	if err := os.WriteFile(prog, env, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := script(t, "#!/usr/bin/env -S prog --flag")
	work, tmp := t.TempDir(), t.TempDir()
	p, err := Build(&spec.SandboxSpec{}, Inputs{Command: cmd, WorkingDir: work, Tmp: tmp, Path: "relative:" + bin})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{cmd: RightExec, "/usr/bin/env": RightExec, prog: RightExec, work: RightRead, tmp: RightWrite, "/dev/null": RightDevice, "/dev/urandom": RightDevice, "/etc/ld.so.cache": RightExec} {
		if got := rightsOf(p, path); got != want {
			t.Errorf("%s: rights %q, want %q", path, got, want)
		}
	}
	libc := ""
	for _, r := range p.Paths {
		if strings.HasPrefix(filepath.Base(r.Path), "libc.so") {
			libc = r.Path
		}
		if strings.HasPrefix(filepath.Base(r.Path), "ld-linux") && r.Rights != RightExec {
			t.Errorf("the dynamic loader %s: rights %q", r.Path, r.Rights)
		}
	}
	if libc == "" {
		t.Errorf("no libc among the grants: %+v", p.Paths)
	}
	if p.Tmp != tmp || !p.Namespace || p.LoopbackUp || p.HandleTCP {
		t.Errorf("plan %+v: want TMPDIR, network none in a namespace", p)
	}

	// Named grants left out are not granted; nothing else is.
	p, err = Build(&spec.SandboxSpec{Grants: []string{spec.GrantCommand}}, Inputs{Command: cmd, WorkingDir: work, Tmp: tmp, Path: bin})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Paths) != 1 || p.Paths[0] != (PathRule{Path: cmd, Rights: RightExec}) || p.Tmp != "" {
		t.Errorf("grants [command]: %+v, TMPDIR %q; want the command alone", p.Paths, p.Tmp)
	}
	if p, _ := Build(&spec.SandboxSpec{Grants: []string{}}, Inputs{Command: cmd}); len(p.Paths) != 0 {
		t.Errorf("grants []: %+v, want nothing", p.Paths)
	}
}

// TestBuildLists: read, write and execute resolve ~/ and relative paths; a
// path that does not exist names its field.
func TestBuildLists(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	for _, d := range []string{filepath.Join(home, "data"), filepath.Join(dir, "out"), filepath.Join(dir, "tools")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	policy := &spec.SandboxSpec{Grants: []string{}, Read: []string{"~/data", "~"}, Write: []string{"out"}, Execute: []string{dir + "/tools/"}}
	p, err := Build(policy, Inputs{Command: "/bin/true", Home: home, ManifestDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := []PathRule{{filepath.Join(home, "data"), RightRead}, {home, RightRead}, {filepath.Join(dir, "out"), RightWrite}, {filepath.Join(dir, "tools"), RightExec}}
	if !slices.Equal(p.Paths, want) {
		t.Errorf("paths %+v, want %+v", p.Paths, want)
	}
	// A path beneath a write grant that a link takes outside it: the
	// server could have made that link.
	secret := filepath.Join(home, "id_ed25519")
	if err := os.WriteFile(secret, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "out", "config")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "tools"), filepath.Join(dir, "out", "tools")); err != nil {
		t.Fatal(err)
	}
	links := &spec.SandboxSpec{Grants: []string{}, Write: []string{"out"}, Read: []string{"out", "out/config"}}
	if _, err := Build(links, Inputs{Command: "/bin/true", Home: home, ManifestDir: dir}); err == nil || !strings.HasPrefix(err.Error(), "spec.stdio.sandbox.read[1]: "+filepath.Join(dir, "out", "config")+" is beneath the write grant "+filepath.Join(dir, "out")+" but resolves to "+secret) {
		t.Errorf("a link out of a write grant: %v", err)
	}
	links.Read = []string{"out/tools"} // a link to a directory beside it is as much a way out
	if _, err := Build(links, Inputs{Command: "/bin/true", Home: home, ManifestDir: dir}); err == nil {
		t.Error("a link to a directory outside the write grant: no error")
	}
	links.Read, links.Grants = nil, nil
	if _, err := Build(links, Inputs{Command: filepath.Join(dir, "out", "config"), WorkingDir: filepath.Join(dir, "out"), Home: home, ManifestDir: dir}); err == nil || !strings.HasPrefix(err.Error(), "the command (grants: command): ") {
		t.Errorf("a command linked out of a write grant: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "out", "real"), nil, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(dir, "out", "inside")); err != nil {
		t.Fatal(err)
	}
	links.Grants, links.Read = []string{}, []string{"out/inside"}
	if _, err := Build(links, Inputs{Command: "/bin/true", Home: home, ManifestDir: dir}); err != nil {
		t.Errorf("a link that stays inside the write grant: %v", err)
	}
	policy.Write = []string{"out", "missing"}
	if _, err := Build(policy, Inputs{Command: "/bin/true", Home: home, ManifestDir: dir}); err == nil || !strings.HasPrefix(err.Error(), "spec.stdio.sandbox.write[1]: "+filepath.Join(dir, "missing")+": no such file") {
		t.Errorf("a missing path: %v", err)
	}
}

// TestBuildNetwork: each mode's namespace and rules; connect's ports once
// each, its hosts kept for Check; dns adds port 53 and the resolver files.
func TestBuildNetwork(t *testing.T) {
	for _, tc := range []struct {
		policy                                    spec.SandboxSpec
		namespace, loopback, handleTCP, handleUDP bool
		tcp, udp                                  []uint16
		hosts                                     []string
	}{
		{policy: spec.SandboxSpec{Network: "none"}, namespace: true},
		{policy: spec.SandboxSpec{Network: "loopback"}, namespace: true, loopback: true},
		{policy: spec.SandboxSpec{Network: "all"}},
		{policy: spec.SandboxSpec{Network: "connect", Connect: []string{"443", "h.example:443", "8080"}}, handleTCP: true, handleUDP: true, tcp: []uint16{443, 8080}, hosts: []string{"h.example:443"}},
		{policy: spec.SandboxSpec{Network: "connect", Connect: []string{"443"}, DNS: true}, handleTCP: true, handleUDP: true, tcp: []uint16{443, 53}, udp: []uint16{53}},
	} {
		p, err := Build(&tc.policy, Inputs{Command: "/bin/true"})
		if err != nil {
			t.Fatal(err)
		}
		if p.Namespace != tc.namespace || p.LoopbackUp != tc.loopback || p.HandleTCP != tc.handleTCP || p.HandleUDP != tc.handleUDP ||
			!slices.Equal(p.ConnectTCP, tc.tcp) || !slices.Equal(p.ConnectUDP, tc.udp) || !slices.Equal(p.Hosts, tc.hosts) {
			t.Errorf("%+v: plan %+v", tc.policy, p)
		}
		if tc.policy.DNS && rightsOf(p, "/etc/resolv.conf") != RightRead {
			if _, err := os.Stat("/etc/resolv.conf"); err == nil {
				t.Errorf("dns: /etc/resolv.conf not readable: %+v", p.Paths)
			}
		}
	}
}

// TestCheck: what each Landlock ABI cannot enforce of a plan, with and
// without the seccomp filter.
func TestCheck(t *testing.T) {
	fs := &Plan{Network: "none", Namespace: true}
	connect := &Plan{Network: "connect", HandleTCP: true, HandleUDP: true, Hosts: []string{"h:443"}}
	for _, tc := range []struct {
		plan    *Plan
		abi     int
		seccomp bool
		want    []string // each a part of one missing item, in order
	}{
		// The filter refuses Unix sockets below ABI 9.
		{fs, 7, true, nil},
		{fs, 6, true, nil},
		{fs, 5, true, []string{"signal and abstract Unix socket scoping"}},
		{&Plan{Network: "connect", HandleTCP: true, HandleUDP: true}, 7, true, []string{"UDP rules"}},
		{fs, 11, true, nil},
		{fs, 9, false, nil},
		{fs, 11, false, nil},
		{fs, 8, false, []string{"Unix socket files outside the grants refused (connect to a D-Bus bus, docker.sock): neither Landlock nor the seccomp filter here (Landlock ABI 9; this kernel has 8)"}},
		{fs, 7, false, []string{"Unix socket files"}},
		{fs, 5, false, []string{"signal and abstract Unix socket scoping (Landlock ABI 6; this kernel has 5)", "Unix socket files"}},
		{fs, 0, false, []string{"file system rules", "truncate", "ioctl", "scoping", "Unix socket files"}},
		{&Plan{Network: "connect", HandleTCP: true, HandleUDP: true}, 10, false, nil},
		{&Plan{Network: "connect", HandleTCP: true, HandleUDP: true}, 9, false, []string{"UDP rules"}},
		{&Plan{Network: "connect", HandleTCP: true, HandleUDP: true}, 7, false, []string{"Unix socket files", "UDP rules"}},
		{&Plan{Network: "connect", HandleTCP: true, HandleUDP: true}, 3, false, []string{"ioctl", "scoping", "Unix socket files", "TCP connect and bind rules (Landlock ABI 4; this kernel has 3)", "UDP rules"}},
		{connect, 10, false, []string{`connect "h:443": Landlock filters ports, not hosts`}},
	} {
		got := Check(tc.plan, Kernel{ABI: tc.abi, Seccomp: tc.seccomp})
		if len(got) != len(tc.want) {
			t.Errorf("Check(%+v, ABI %d, seccomp %v) = %q, want %d items %q", tc.plan, tc.abi, tc.seccomp, got, len(tc.want), tc.want)
			continue
		}
		for i := range got {
			if !strings.Contains(got[i], tc.want[i]) {
				t.Errorf("Check(%+v, ABI %d)[%d] = %q, want it to hold %q", tc.plan, tc.abi, i, got[i], tc.want[i])
			}
		}
	}
	if got := Check(&Plan{Network: "connect", HandleTCP: true, HandleUDP: true}, Kernel{ABI: 11, MPTCP: true}); len(got) != 1 || !strings.Contains(got[0], "Multipath TCP") {
		t.Errorf("connect on a kernel with MPTCP: %q, want Multipath TCP missing", got)
	}
	if got := Check(&Plan{Network: "none", Namespace: true}, Kernel{ABI: 11, MPTCP: true}); got != nil {
		t.Errorf("none on a kernel with MPTCP: %q, want nothing missing (a namespace holds MPTCP too)", got)
	}
	err := &UnsupportedError{Missing: Check(connect, Kernel{ABI: 7})}
	if !err.SandboxUnsupported() || !strings.Contains(err.Error(), "bestEffort: true") || !strings.Contains(err.Error(), "UDP rules") {
		t.Errorf("UnsupportedError: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		plan    Plan
		missing []string
		abi     int
		want    string
	}{
		{Plan{Network: "connect"}, nil, 10, "landlock fs+net"},
		{Plan{Network: "connect"}, []string{"UDP"}, 7, "landlock fs+net (best effort)"},
		{Plan{Network: "none", Namespace: true}, nil, 7, "landlock fs+netns none"},
		{Plan{Network: "loopback", Namespace: true}, nil, 7, "landlock fs+netns loopback"},
		{Plan{Network: "all"}, nil, 7, "landlock fs"},
		{Plan{Network: "none", Namespace: true}, []string{"all"}, 0, "netns none, no-new-privileges, no landlock (best effort)"},
		{Plan{Network: "all"}, []string{"all"}, 0, "no-new-privileges, no landlock (best effort)"},
		{Plan{Network: "all"}, []string{"ioctl"}, 1, "landlock fs (best effort)"},
	} {
		if got := tc.plan.Describe(tc.missing, tc.abi); got != tc.want {
			t.Errorf("Describe(%+v, %q, %d) = %q, want %q", tc.plan, tc.missing, tc.abi, got, tc.want)
		}
	}
}

// TestBuildRefusesWritingWhatTetherRuns: a write grant that is, or holds,
// tether's executable, the manifest's directory or the state directory
// (through a symbolic link too) fails the start naming the field; one
// beside or below them does not. No grant may hold the state directory,
// which keeps OAuth tokens, nor lie in it, but the server's own TMPDIR.
func TestBuildRefusesWritingWhatTetherRuns(t *testing.T) {
	root := t.TempDir()
	manifests := filepath.Join(root, "manifests")
	state := filepath.Join(manifests, ".tether")
	beside := filepath.Join(root, "data")
	for _, d := range []string{filepath.Join(state, "oauth"), filepath.Join(state, "sandbox-tmp", "t"), beside, filepath.Join(manifests, "data", "sub"), filepath.Join(manifests, ".cache")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(beside, "to-root")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	in := Inputs{Command: "/bin/true", ManifestDir: manifests, Protected: []Protected{
		{Path: "/bin/true", What: "tether's executable"}, {Path: manifests, What: "the manifest's directory", Tree: true}, {Path: state, What: "the state directory", Read: true}}}
	for _, tc := range []struct {
		write []string
		want  string // "" for no error
	}{
		{[]string{beside}, ""},
		{[]string{"data2"}, "no such file"},
		{[]string{filepath.Join(state, "..", "..", "data")}, ""},
		{[]string{beside, "."}, "spec.stdio.sandbox.write[1]: " + manifests + " holds the manifest's directory"},
		{[]string{root}, "spec.stdio.sandbox.write[0]: " + root + " holds the manifest's directory"},
		{[]string{link}, "spec.stdio.sandbox.write[0]: " + link + " holds the manifest's directory"},
		{[]string{".tether"}, "holds the state directory"},
		{[]string{"/bin"}, "holds tether's executable"},
		// In the manifest tree: a manifest written there would run.
		{[]string{"data"}, "spec.stdio.sandbox.write[0]: " + filepath.Join(manifests, "data") + " is in the manifest's directory"},
		{[]string{"data/sub"}, "is in the manifest's directory"},
		{[]string{".cache"}, ""},
	} {
		_, err := Build(&spec.SandboxSpec{Grants: []string{}, Write: tc.write}, in)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("write %q: %v, want %q", tc.write, err, tc.want)
		}
	}
	// The server's TMPDIR is in the state directory's sandbox-tmp/.
	tmpIn := in
	tmpIn.Tmp = filepath.Join(state, "sandbox-tmp", "t")
	if _, err := Build(&spec.SandboxSpec{Grants: []string{spec.GrantTmp}}, tmpIn); err != nil {
		t.Errorf("the private TMPDIR in the state directory: %v", err)
	}
	// Reading tether's executable or the manifests is the manifest's to
	// grant; reading the state directory (tokens) is not, by any grant.
	if _, err := Build(&spec.SandboxSpec{Grants: []string{}, Read: []string{"/bin", filepath.Join(root, "data")}, Execute: []string{"/bin/true"}}, in); err != nil {
		t.Errorf("read of tether's executable's directory: %v", err)
	}
	for _, tc := range []struct {
		policy  spec.SandboxSpec
		in      Inputs
		wantErr string
	}{
		{spec.SandboxSpec{Grants: []string{}, Read: []string{root}}, in, "spec.stdio.sandbox.read[0]: " + root + " holds the state directory (" + state + "), whose OAuth tokens"},
		{spec.SandboxSpec{Grants: []string{}, Execute: []string{"."}}, in, "spec.stdio.sandbox.execute[0]: " + manifests + " holds the state directory"},
		{spec.SandboxSpec{Grants: []string{spec.GrantWorkingDir}}, Inputs{Command: "/bin/true", WorkingDir: manifests, Protected: in.Protected}, "workingDir (grants: workingDir): " + manifests + " holds the state directory"},
		// Nor what lies in it: other connections' tokens, secret files.
		{spec.SandboxSpec{Grants: []string{}, Read: []string{".tether/oauth"}}, in, "spec.stdio.sandbox.read[0]: " + filepath.Join(state, "oauth") + " is in the state directory"},
		{spec.SandboxSpec{Grants: []string{}, Write: []string{".tether/oauth"}}, in, "spec.stdio.sandbox.write[0]: " + filepath.Join(state, "oauth") + " is in the state directory"},
	} {
		if _, err := Build(&tc.policy, tc.in); err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
			t.Errorf("%+v: %v, want %q", tc.policy, err, tc.wantErr)
		}
	}
}

// TestBuildLimits: the limits become the plan's, memory in bytes.
func TestBuildLimits(t *testing.T) {
	procs, files := 64, 256
	p, err := Build(&spec.SandboxSpec{Limits: &spec.SandboxLimits{Memory: "3Mi", Processes: &procs, OpenFiles: &files}}, Inputs{Command: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Limits != (Limits{Memory: 3 << 20, Processes: 64, OpenFiles: 256}) {
		t.Errorf("limits %+v", p.Limits)
	}
	if p, _ := Build(&spec.SandboxSpec{Limits: &spec.SandboxLimits{}}, Inputs{Command: "/bin/true"}); p.Limits != (Limits{}) {
		t.Errorf("no limits set: %+v", p.Limits)
	}
}

// TestInterpreters: #! lines as the kernel reads them, and env's program.
func TestInterpreters(t *testing.T) {
	bin := t.TempDir()
	prog := filepath.Join(bin, "node")
	elfProgram, err := os.ReadFile("/usr/bin/env")
	if err != nil {
		t.Skip("no /usr/bin/env")
	}
	// A file that is no interpreter (a key, or a script that names one) is
	// not granted by a #! line, which a server may have rewritten.
	secret := filepath.Join(bin, "id_ed25519")
	for file, data := range map[string][]byte{prog: elfProgram, secret: []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n")} {
		if err := os.WriteFile(file, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"#!" + secret, nil},
		{"#!/usr/bin/env id_ed25519", []string{"/usr/bin/env"}},
		{"#!/usr/bin/env " + secret, []string{"/usr/bin/env"}},
		{"#!node", nil},
		{"#!/bin/sh -e", []string{"/bin/sh"}},
		{"#!/usr/bin/env node", []string{"/usr/bin/env", prog}},
		{"#! /usr/bin/env -S -i node --flag", []string{"/usr/bin/env", prog}},
		{"#!/usr/bin/env", []string{"/usr/bin/env"}},
		{"#!/usr/bin/env -S", []string{"/usr/bin/env"}},
		{"#!/usr/bin/env missing", []string{"/usr/bin/env"}},
		{"#!\n/bin/sh", nil},
		{"echo not a script", nil},
	} {
		if got := interpreters(script(t, tc.line), bin); !slices.Equal(got, tc.want) {
			t.Errorf("%q: interpreters %q, want %q", tc.line, got, tc.want)
		}
	}
	// A #! line without a newline (the whole file).
	f := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(f, []byte("#!/bin/sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := interpreters(f, bin); !slices.Equal(got, []string{"/bin/sh"}) {
		t.Errorf("a #! line without a newline: %q", got)
	}
}

// TestLibrariesAreELF: a library the walk finds is granted only when it is
// an ELF file: an ELF program a server rewrote (beneath a write grant) to
// name ~/.ssh/id_ed25519 as its loader does not get it granted.
func TestLibrariesAreELF(t *testing.T) {
	data, err := os.ReadFile("/usr/bin/env")
	if err != nil {
		t.Skip("no /usr/bin/env")
	}
	f, err := elf.Open("/usr/bin/env")
	if err != nil {
		t.Skip(err)
	}
	var interp *elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp = p
		}
	}
	_ = f.Close()
	if interp == nil || interp.Filesz < 12 {
		t.Skip("/usr/bin/env has no PT_INTERP to rewrite")
	}
	// The hostile loader's path, exactly as long as the real one.
	dir, err := os.MkdirTemp("", "t") // t.TempDir's name is too long
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	n := int(interp.Filesz) - 1 - len(dir) - 1
	if n < 1 {
		t.Skip("the temporary directory's path is longer than the loader's")
	}
	secret := filepath.Join(dir, strings.Repeat("k", n))
	if err := os.WriteFile(secret, []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	copy(data[interp.Off:], secret+"\x00")
	prog := filepath.Join(dir, "prog")
	if err := os.WriteFile(prog, data, 0o755); err != nil {
		t.Fatal(err)
	}
	got := libraries([]string{prog})
	if slices.Contains(got, secret) {
		t.Errorf("libraries of a program whose loader is a key: %q, want the key left out", got)
	}
	if !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(filepath.Base(l), "libc.so") }) {
		t.Errorf("libraries %q: want its libc still", got)
	}
}

// TestLibrariesBoundTheLoaderPath: a program whose PT_INTERP claims a
// terabyte (a header a server rewrote) costs tether no such allocation:
// the loader is not read, the walk goes on.
func TestLibrariesBoundTheLoaderPath(t *testing.T) {
	data, err := os.ReadFile("/usr/bin/env")
	if err != nil {
		t.Skip("no /usr/bin/env")
	}
	f, err := elf.Open("/usr/bin/env")
	if err != nil {
		t.Skip(err)
	}
	idx := slices.IndexFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
	class, order := f.Class, f.ByteOrder
	_ = f.Close()
	if idx < 0 || class != elf.ELFCLASS64 {
		t.Skip("/usr/bin/env is not a 64-bit ELF program with a loader")
	}
	// Elf64_Ehdr: e_phoff at 32, e_phentsize at 54; Elf64_Phdr: p_filesz at 32.
	at := int(order.Uint64(data[32:])) + idx*int(order.Uint16(data[54:])) + 32
	order.PutUint64(data[at:], 1<<40)
	prog := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(prog, data, 0o755); err != nil {
		t.Fatal(err)
	}
	got := libraries([]string{prog})
	if !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(filepath.Base(l), "libc.so") }) {
		t.Errorf("libraries %q: want its libc still", got)
	}
}

// TestLibrariesOfAScript: a script has no libraries of its own (and so no
// loader cache either); its interpreter's come with the interpreter grant.
func TestLibrariesOfAScript(t *testing.T) {
	p, err := Build(&spec.SandboxSpec{Grants: []string{spec.GrantLibraries}}, Inputs{Command: script(t, "#!/bin/sh")})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Paths) != 0 {
		t.Errorf("libraries of a script without the interpreter grant: %+v, want none", p.Paths)
	}
}

// TestLibraryDirs: ld.so.conf's directories, comments and includes (a file
// that includes itself stops at the depth bound), then the defaults.
func TestLibraryDirs(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "main")
	inc := filepath.Join(dir, "x.conf")
	if err := os.WriteFile(conf, []byte("# comment\n/opt/lib # trailing\ninclude "+dir+"/*.conf\nrelative/lib\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(inc, []byte("/opt/x\ninclude "+inc+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := libraryDirs(conf)
	want := []string{"/opt/lib", "/opt/x", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
	if !slices.Equal(got, want) {
		t.Errorf("libraryDirs = %q, want %q", got, want)
	}
}

// TestBuildRefusalsAreRefusedErrors: what Build refuses of the policy
// itself (a grant reaching what tether protects, and the fields validation
// refuses first, should a spec come past it) is a RefusedError naming the
// field, held until the spec changes (PolicyRefused) when the paths as
// written reach it; one that holds only through a symbolic link (a way out
// of a write grant, a grant whose link leads into what is protected) is
// retried, since the link may change with no new spec; so is a listed path
// that does not exist, which may be made.
func TestBuildRefusalsAreRefusedErrors(t *testing.T) {
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	for _, d := range []string{filepath.Join(dir, "out"), manifests} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "out", "away")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(manifests, filepath.Join(dir, "there")); err != nil {
		t.Fatal(err)
	}
	one := 1
	for _, tc := range []struct {
		name    string
		policy  spec.SandboxSpec
		refused string // the refusal's start; "" for an error that is no RefusedError
		linked  bool   // a RefusedError that is retried, not held
	}{
		{"a write grant of the manifest's directory, as written", spec.SandboxSpec{Write: []string{"manifests"}},
			"spec.stdio.sandbox.write[0]: " + manifests + " holds the manifest's directory", false},
		{"a write grant that reaches it through a link", spec.SandboxSpec{Write: []string{"there"}},
			"spec.stdio.sandbox.write[0]: " + filepath.Join(dir, "there") + " holds the manifest's directory", true},
		{"a link out of a write grant", spec.SandboxSpec{Write: []string{"out"}, Read: []string{"out/away"}},
			"spec.stdio.sandbox.read[0]: " + filepath.Join(dir, "out", "away") + " is beneath the write grant", true},
		{"a connect entry that does not parse", spec.SandboxSpec{Network: spec.NetworkConnect, Connect: []string{"443", "host:port"}},
			"spec.stdio.sandbox.connect[1]: ", false},
		{"a memory limit that does not parse", spec.SandboxSpec{Limits: &spec.SandboxLimits{Memory: "lots", Processes: &one}},
			"spec.stdio.sandbox.limits.memory: ", false},
		{"a listed path missing", spec.SandboxSpec{Read: []string{"missing"}}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := tc.policy
			policy.Grants = []string{}
			_, err := Build(&policy, Inputs{Command: "/bin/true", ManifestDir: dir,
				Protected: []Protected{{Path: manifests, What: "the manifest's directory", Tree: true}}})
			var refused *RefusedError
			isRefused := errors.As(err, &refused)
			switch {
			case err == nil:
				t.Fatal("Build: no error")
			case tc.refused != "" && (!isRefused || !strings.HasPrefix(err.Error(), tc.refused)):
				t.Errorf("Build: %v (a RefusedError: %t), want a refusal starting %q", err, isRefused, tc.refused)
			case tc.refused == "" && isRefused:
				t.Errorf("Build: %v is a RefusedError, want it retried", err)
			case isRefused && refused.PolicyRefused() == tc.linked:
				t.Errorf("Build: %v: PolicyRefused %t, want %t (held only when the paths as written reach it)", err, refused.PolicyRefused(), !tc.linked)
			}
		})
	}
}
