package connection

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/sandbox"
	"github.com/tether-mcp/tether/spec"
)

// Container servers (spec.container, docs/contract.md §1).
//
// The runtime's command line (docker or podman) runs the image, attached:
// `run -i --rm` for a server on stdin and stdout, or without -i and with
// the port published on 127.0.0.1 for a server on a port. That command is
// tether's child like a stdio server (its own process group, the
// parent-death signal, its stderr tail); when it exits, the session ends.
//
// No secret reaches the runtime's command line or the container's
// configuration (what `docker inspect` shows): `-e NAME=value` and
// `--env-file` both land in Config.Env. Instead each container gets a
// directory of tether's (0700, under the state directory's containers/,
// removed with the container): secretFiles are files there, mounted
// read-only at /run/secrets; env goes to a file there that tether's own
// static binary, mounted read-only at /.tether/init as the container's
// entrypoint, reads before it execs the server's real command with that
// environment (RunContainerInit). The configuration shows the paths and the
// command, never a value.
//
// Every container carries tether's labels: ContainerLabelOwner (which state
// directory's tether runs it) and the tether's pid and start time, so that
// the next start of a tether on the same state directory removes what a
// crashed one left (RemoveLeftoverContainers) and never a running one's.

// Labels on the containers tether runs.
const (
	ContainerLabelOwner      = "dev.tether.owner"
	ContainerLabelConnection = "dev.tether.connection"
	containerLabelTether     = "dev.tether.tether" // "<pid>-<start ticks>"
)

// Paths in the container (spec.ContainerInitDir is reserved for them).
const (
	containerInitPath = spec.ContainerInitDir + "/init"
	containerEnvPath  = spec.ContainerInitDir + "/env"
	// ContainerInitCommand is the hidden tether command the entrypoint runs.
	ContainerInitCommand = "container-init"
)

// Bounds of the runtime's own commands (inspect, pull, port, rm).
const (
	runtimeCommandTimeout = 30 * time.Second
	// runtimeWaitDelay is how long a killed runtime command's output
	// may stay open (held by a process it started) before it is closed.
	runtimeWaitDelay = time.Second
	// containerRemoveTimeout bounds removing a container after its session.
	containerRemoveTimeout = 10 * time.Second
	// portPollEvery is how often a starting port server is looked at.
	portPollEvery = 50 * time.Millisecond
)

// ContainerRuntime is what runs container servers: the runtime's command
// and where tether keeps each container's directory. The daemon makes one
// (FindContainerRuntime) and passes it in ConnectorOptions.
type ContainerRuntime struct {
	// Name is "docker" or "podman"; Path the command's path.
	Name, Path string
	// Dir holds one directory per running container (0700, tether's
	// alone); empty: a temporary directory per container.
	Dir string
	// Owner labels tether's containers (ContainerLabelOwner): a digest of
	// the state directory's path with its symbolic links resolved; empty:
	// none, and no leftovers are looked for.
	Owner string
	// StateDir is the state directory (absolute), which no mount may show
	// a container: it holds every connection's secrets and tokens; empty:
	// none.
	StateDir string
	// Init is tether's own executable, mounted as the entrypoint of a
	// container that has env; empty when it cannot be (InitProblem says
	// why).
	Init        string
	InitProblem string
	// Env is the runtime command's environment (DOCKER_HOST and the like);
	// nil: tether's own.
	Env []string
	// Started is when this tether began to use the runtime: a directory of
	// Dir older than that and without a container is a leftover.
	Started time.Time
	// commandTimeout bounds each of the runtime's own commands (0:
	// runtimeCommandTimeout); tests shorten it.
	commandTimeout time.Duration
}

// FindContainerRuntime resolves --container-runtime: "auto" (docker if it
// is on PATH, else podman), "docker", "podman", or a path to either. dir
// and stateDir may be empty (no state directory).
func FindContainerRuntime(flag, dir, stateDir string) (*ContainerRuntime, error) {
	var candidates []string
	switch flag {
	case "", "auto":
		candidates = []string{"docker", "podman"}
	default:
		candidates = []string{flag}
	}
	var path string
	var lookErr error
	for _, c := range candidates {
		p, err := exec.LookPath(c)
		if err == nil {
			path = p
			break
		}
		lookErr = err
	}
	switch {
	case path == "" && len(candidates) > 1:
		return nil, fmt.Errorf("--container-runtime %s: no %s found on PATH", flag, strings.Join(candidates, " or "))
	case path == "":
		return nil, fmt.Errorf("--container-runtime: %w", lookErr)
	}
	name := "docker"
	if strings.Contains(filepath.Base(path), "podman") {
		name = "podman"
	}
	rt := &ContainerRuntime{Name: name, Path: path, Dir: dir, Started: time.Now()}
	if stateDir != "" {
		// Every spelling of one state directory (a symbolic link to it),
		// which its lock treats as one, labels alike: else the containers
		// a killed tether left are never found by the next one.
		key := stateDir
		if r, err := filepath.EvalSymlinks(stateDir); err == nil {
			key = r
		}
		sum := sha256.Sum256([]byte(key))
		rt.Owner = hex.EncodeToString(sum[:8])
		rt.StateDir = stateDir
	}
	rt.Init, rt.InitProblem = containerInit()
	return rt, nil
}

// containerInit is tether's own executable when it can run in any Linux
// container (a static binary), else why not.
func containerInit() (string, string) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", "tether cannot find its own executable: " + err.Error()
	}
	if problem := staticLinuxProblem(exe); problem != "" {
		return "", problem
	}
	return exe, ""
}

// command is the runtime's command with args, bounded by ctx.
func (rt *ContainerRuntime) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, rt.Path, args...)
	cmd.Env = rt.Env
	// Once ctx is done and the command killed, a process it started that
	// still holds its output (podman re-executes itself in a user
	// namespace) must not hold the wait up: the pipes are closed.
	cmd.WaitDelay = runtimeWaitDelay
	return cmd
}

// output runs the runtime's command, bounded by the runtime's command
// timeout, and returns its standard output, or an error with its
// standard error's last line.
func (rt *ContainerRuntime) output(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(rt.commandTimeout, runtimeCommandTimeout))
	defer cancel()
	return rt.outputWithin(ctx, args...)
}

// outputWithin is output bounded by ctx alone (a pull, which takes as long
// as the image is large: the connect timeout bounds it).
func (rt *ContainerRuntime) outputWithin(ctx context.Context, args ...string) ([]byte, error) {
	cmd := rt.command(ctx, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		if len(msg) > MaxLineBytes {
			msg = msg[:MaxLineBytes]
		}
		if msg != "" {
			return out, fmt.Errorf("%s %s: %s", rt.Name, args[0], msg)
		}
		return out, fmt.Errorf("%s %s: %w", rt.Name, args[0], err)
	}
	return out, nil
}

// container is one container server: its name, its directory and how to
// remove both.
type container struct {
	rt   *ContainerRuntime
	name string
	dir  string // tether's directory for it; "" when none was made
	log  *slog.Logger
}

// remove removes the container (whatever state it is in) and its
// directory, and waits until the runtime no longer knows the container
// (--rm may be removing it already), bounded by containerRemoveTimeout.
func (c *container) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), containerRemoveTimeout)
	defer cancel()
	for {
		_, err := c.rt.output(ctx, "rm", "--force", c.name)
		if err == nil || isNoSuchContainer(err) {
			break
		}
		// "removal already in progress" (--rm): wait for it to finish.
		if !pause(ctx) {
			c.log.Warn("cannot remove the server's container", "container", c.name, "err", err)
			break
		}
	}
	if c.dir != "" {
		if err := os.RemoveAll(c.dir); err != nil {
			c.log.Warn("cannot remove the container's secrets directory", "dir", c.dir, "err", err)
		}
	}
}

// pause waits a moment (portPollEvery) for the runtime to move on: it
// tells of no event; false once ctx is done.
func pause(ctx context.Context) bool { return sleepCtx(ctx, portPollEvery) == nil }

// isNoSuchContainer: the runtime does not know the container (any more).
func isNoSuchContainer(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "no such container") || strings.Contains(s, "no container with name")
}

// startContainer starts the server's container and returns the transport
// that speaks to it: the runtime command's stdin and stdout, or for a port
// server streamable HTTP at the published port once something answers
// there. On failure what it made is removed, or left to failConnect once
// the runtime's command runs (s.proc).
func (s *Session) startContainer(ctx context.Context, c *spec.ContainerSpec, manifestDir string, envVals, fileVals []namedValue) (mcp.Transport, error) {
	rt := s.conn.containers
	if rt == nil {
		return nil, errors.New("no container runtime: docker or podman must be on PATH (tether run --container-runtime)")
	}
	if len(envVals) > 0 && rt.Init == "" {
		return nil, fmt.Errorf("container.env cannot be set inside the container: %s (pass secrets as container.secretFiles instead)", rt.InitProblem)
	}
	name, err := containerName(s.name)
	if err != nil {
		return nil, err
	}
	rt.markUsed()
	ct := &container{rt: rt, name: name, log: s.log}
	ok := false
	defer func() {
		if !ok {
			ct.remove()
		}
	}()
	if len(envVals) > 0 || len(fileVals) > 0 {
		if ct.dir, err = writeContainerDir(rt.Dir, name, envVals, fileVals); err != nil {
			return nil, err
		}
	}
	args, err := s.containerArgs(ctx, ct, c, manifestDir, len(envVals) > 0, len(fileVals) > 0)
	if err != nil {
		return nil, err
	}
	proc, err := startProcess(rt.Name, rt.Path, args, "", runtimeEnv(rt), newStderrTail(s.red), s.log, s.conn.ledger, nil)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", rt.Name, err)
	}
	proc.container, proc.runtime = name, rt.Name
	proc.afterStop = ct.remove
	s.proc = proc
	ok = true
	if c.Port == 0 {
		return &orderedTransport{Transport: &mcp.IOTransport{Reader: proc.stdout, Writer: proc.stdin, MaxLineLength: int(s.limit.max)}}, nil
	}
	// A port server: nothing speaks on stdin and stdout. What it writes to
	// stdout (logs, most often) joins stderr in the tail; left unread, a
	// full pipe would block the runtime's command and then the server.
	proc.noStdin = true
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		lines := &lineWriter{w: proc.tail}
		_, _ = io.Copy(lines, proc.stdout) // until stop closes stdout
		lines.flush()
	}()
	proc.afterStop = func() { <-drained; ct.remove() }
	addr, err := s.publishedPort(ctx, ct, c.Port)
	if err != nil {
		return nil, err
	}
	url := "http://" + addr + c.EndpointPath()
	if err := s.awaitHTTP(ctx, url); err != nil {
		return nil, err
	}
	h := &spec.HTTPSpec{URL: url, Transport: spec.TransportStreamable}
	transport, _, err := httpTransport(s.conn.httpBase, h, nil, s.ctx, s.limit, &s.forgotten, s.red.live, s.newResumeGate())
	if st, ok := transport.(*mcp.StreamableClientTransport); ok {
		s.httpClient, s.httpURL = st.HTTPClient, st.Endpoint
	}
	return transport, err
}

// lineWriter hands w whole lines only (one Write each), so that lines of
// stdout and of stderr, written to one tail by two goroutines, do not cut
// into each other; a line longer than MaxLineBytes is handed on in pieces.
type lineWriter struct {
	w       io.Writer
	partial []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.partial = append(l.partial, p...)
			if len(l.partial) >= MaxLineBytes {
				l.flush()
			}
			break
		}
		l.partial = append(l.partial, p[:i+1]...)
		l.flush()
		p = p[i+1:]
	}
	return n, nil
}

// flush hands on what is buffered.
func (l *lineWriter) flush() {
	if len(l.partial) > 0 {
		_, _ = l.w.Write(l.partial)
		l.partial = l.partial[:0]
	}
}

// runtimeEnv is the environment of the runtime's command: tether's own
// (DOCKER_HOST, XDG_RUNTIME_DIR, ...) unless the runtime says otherwise.
// It never reaches the server: the container has only the image's
// environment and the manifest's env.
func runtimeEnv(rt *ContainerRuntime) []string {
	if rt.Env != nil {
		return rt.Env
	}
	return os.Environ()
}

// containerName is tether-<connection>-<random>: a new name for every
// start, so that one being removed (--rm) never blocks the next.
func containerName(conn string) (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "tether-" + conn + "-" + hex.EncodeToString(b[:]), nil
}

// writeContainerDir makes the container's directory under parent (a
// temporary one when parent is empty): 0700, so that only tether's user
// reaches what is in it, with the env file and the secrets/ directory the
// container mounts. Inside, everything is readable by all: the container's
// user may be any uid, and it sees only the mounts, not the 0700 parent.
func writeContainerDir(parent, name string, envVals, fileVals []namedValue) (dir string, err error) {
	if parent == "" {
		dir, err = os.MkdirTemp("", name+"-")
		if err == nil {
			// The runtime's daemon resolves the mount source: absolute,
			// whatever TMPDIR says.
			var abs string
			if abs, err = filepath.Abs(dir); err != nil {
				_ = os.RemoveAll(dir)
			}
			dir = abs
		}
	} else {
		if err = os.MkdirAll(parent, 0o700); err == nil {
			dir = filepath.Join(parent, name)
			err = os.Mkdir(dir, 0o700)
		}
	}
	if err != nil {
		return "", fmt.Errorf("container secrets directory: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
			dir = ""
		}
	}()
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", err
	}
	if len(envVals) > 0 {
		env := make([]string, 0, len(envVals))
		for _, nv := range envVals {
			env = append(env, nv.Name+"="+nv.Value)
		}
		data, _ := json.Marshal(env)
		if err := writeReadable(filepath.Join(dir, "env"), data); err != nil {
			return "", err
		}
	}
	if len(fileVals) > 0 {
		secrets := filepath.Join(dir, "secrets")
		if err := os.Mkdir(secrets, 0o755); err != nil {
			return "", fmt.Errorf("container secrets directory: %w", err)
		}
		if err := os.Chmod(secrets, 0o755); err != nil { // whatever the umask
			return "", err
		}
		for _, nv := range fileVals {
			if err := writeReadable(filepath.Join(secrets, nv.Name), []byte(nv.Value)); err != nil {
				return "", err
			}
		}
	}
	return dir, nil
}

// writeReadable writes a file the container's user can read, whatever the
// umask; its error names the file, never the content.
func writeReadable(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o444); err != nil {
		return fmt.Errorf("container secrets directory: %w", err)
	}
	if err := os.Chmod(path, 0o444); err != nil {
		return fmt.Errorf("container secrets directory: %w", err)
	}
	return nil
}

// containerArgs is the runtime's command line for the container: options
// in --name=value form (a value never passes for an option), then "--",
// the image and the command. It holds no secret: values are in ct.dir.
func (s *Session) containerArgs(ctx context.Context, ct *container, c *spec.ContainerSpec, manifestDir string, hasEnv, hasFiles bool) ([]string, error) {
	rt := ct.rt
	args := []string{"run", "--rm", "--name=" + ct.name}
	if c.Port == 0 {
		args = append(args, "--interactive")
	} else {
		args = append(args, "--publish=127.0.0.1::"+strconv.Itoa(c.Port)+"/tcp")
	}
	args = append(args,
		"--label="+ContainerLabelConnection+"="+s.name,
		"--network="+c.NetworkMode(),
		"--memory="+strconv.FormatUint(c.MemoryBytes(), 10),
		"--memory-swap="+strconv.FormatUint(c.MemoryBytes(), 10), // no swap beyond the limit
		"--pids-limit="+strconv.Itoa(c.PidsLimit()),
		"--cap-drop=ALL",
		"--security-opt=no-new-privileges",
		// The session carries the server's output; nothing is kept by
		// the runtime (MCP traffic can hold what a tool returned).
		"--log-driver=none",
	)
	if rt.Owner != "" {
		start, _ := startTicks(os.Getpid())
		args = append(args,
			"--label="+ContainerLabelOwner+"="+rt.Owner,
			"--label="+containerLabelTether+"="+strconv.Itoa(os.Getpid())+"-"+strconv.FormatUint(start, 10))
	}
	if c.User != "" {
		args = append(args, "--user="+c.User)
	}
	for i, m := range c.Mounts {
		src := m.Source
		if !filepath.IsAbs(src) {
			if manifestDir == "" {
				// No retry finds a directory the object has not got.
				return nil, &sandbox.RefusedError{Field: fmt.Sprintf("spec.container.mounts[%d]", i),
					Problem: fmt.Sprintf("source %q is relative but the manifest's directory is unknown (an object from the Kubernetes API has none): give an absolute path", m.Source)}
			}
			src = filepath.Join(manifestDir, src)
		}
		// The runtime's daemon resolves it, not tether: make it absolute.
		abs, err := filepath.Abs(src)
		if err != nil {
			return nil, fmt.Errorf("container.mounts: source %s: %w", src, err)
		}
		src = abs
		if _, err := os.Stat(src); err != nil {
			return nil, fmt.Errorf("container.mounts: source %s: %w", src, errors.Unwrap(err))
		}
		field := fmt.Sprintf("spec.container.mounts[%d]", i)
		if err := rt.exposesState(field, src); err != nil {
			return nil, err
		}
		if m.Writable {
			if err := writesWhatTetherRuns(field, src, manifestDir, s.conn.manifestTree()); err != nil {
				return nil, err
			}
		}
		args = append(args, "--mount="+bindMount(src, m.Target, !m.Writable))
	}
	if hasFiles {
		args = append(args, "--mount="+bindMount(filepath.Join(ct.dir, "secrets"), spec.ContainerSecretsDir, true))
	}
	var cmd []string
	switch {
	case hasEnv:
		// tether's binary starts the server with its env: it needs the
		// whole command, the image's parts included.
		argv, err := s.imageCommand(ctx, rt, c)
		if err != nil {
			return nil, err
		}
		args = append(args,
			"--mount="+bindMount(rt.Init, containerInitPath, true),
			"--mount="+bindMount(filepath.Join(ct.dir, "env"), containerEnvPath, true),
			"--entrypoint="+containerInitPath)
		cmd = append([]string{ContainerInitCommand, containerEnvPath, "--"}, argv...)
	case len(c.Command) > 0:
		args = append(args, "--entrypoint="+c.Command[0])
		cmd = append(append(cmd, c.Command[1:]...), c.Args...)
	default:
		cmd = c.Args
	}
	args = append(args, "--", c.Image)
	return append(args, cmd...), nil
}

// exposesState refuses a mount source that is the state directory, inside
// it or holds it (the manifest's own directory holds the default one): the
// server would read every connection's secrets, tokens and the other
// containers' secret files there. Symbolic links are followed, as the
// runtime's daemon follows them; a refusal that holds only through one is
// retried (Linked), since the link may change with no new spec.
func (rt *ContainerRuntime) exposesState(field, src string) error {
	if rt.StateDir == "" {
		return nil
	}
	problem := func(s, state string) string {
		switch {
		case within(state, s):
			return fmt.Sprintf("holds tether's state directory %s (every connection's secrets): mount a directory beside it", rt.StateDir)
		case within(s, state):
			return fmt.Sprintf("is in tether's state directory %s (every connection's secrets)", rt.StateDir)
		}
		return ""
	}
	if p := problem(resolve(src), resolve(rt.StateDir)); p != "" {
		return &sandbox.RefusedError{Field: field, Path: src, Problem: p,
			Linked: problem(lexical(src), lexical(rt.StateDir)) == ""}
	}
	return nil
}

// writesWhatTetherRuns refuses a writable mount source that is or holds
// what a sandbox's write grant may not (protected): tether's executable or
// the manifest's directory or tree. Through it the server changes what
// tether runs on the host, unconfined: a manifest it writes there starts
// any command. Symbolic links are followed; a refusal that holds only
// through one is retried (Linked).
func writesWhatTetherRuns(field, src, manifestDir string, tree []string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%s: finding tether's own executable: %w", field, err)
	}
	for _, p := range protected(self, manifestDir, "", tree) {
		if p.Path == "" || p.Read {
			continue
		}
		problem := func(s, pp string) string {
			switch {
			case within(pp, s):
				return fmt.Sprintf("(writable) holds %s (%s): a server that may write there could change what tether runs, unconfined; mount it read-only, or a directory beside it", p.What, p.Path)
			case p.Tree && sandbox.InTree(s, pp):
				return fmt.Sprintf("(writable) is in %s (%s), whose manifests tether reads: one the server wrote there would run on the host, unconfined; mount a directory beside it, or beneath a hidden name (.data), which tether does not read", p.What, p.Path)
			}
			return ""
		}
		if msg := problem(resolve(src), resolve(p.Path)); msg != "" {
			return &sandbox.RefusedError{Field: field, Path: src, Problem: msg,
				Linked: problem(lexical(src), lexical(p.Path)) == ""}
		}
	}
	return nil
}

// resolve is p with its symbolic links resolved, or cleaned when that
// fails; lexical is p made absolute and clean, its links left as they are.
func resolve(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

func lexical(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// within reports whether p is dir or lies beneath it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// bindMount is a --mount value, CSV-quoted as the runtime reads it, so
// that a comma or a quote in a path stays in the path.
func bindMount(src, dst string, readOnly bool) string {
	fields := []string{"type=bind", "source=" + src, "target=" + dst}
	if readOnly {
		fields = append(fields, "readonly")
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(fields)
	w.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

// imageCommand is the command the container runs: command and args as the
// manifest gives them, the image's entrypoint and cmd for what it leaves
// out (as the runtime itself would). The image is pulled when it is not
// present.
func (s *Session) imageCommand(ctx context.Context, rt *ContainerRuntime, c *spec.ContainerSpec) ([]string, error) {
	if len(c.Command) > 0 {
		return append(append([]string(nil), c.Command...), c.Args...), nil
	}
	inspect := func() ([]byte, error) {
		return rt.output(ctx, "image", "inspect", "--format={{json .Config.Entrypoint}}\t{{json .Config.Cmd}}", "--", c.Image)
	}
	out, err := inspect()
	if err != nil && (strings.Contains(strings.ToLower(err.Error()), "no such image") || strings.Contains(err.Error(), "image not known")) {
		// Bounded by the connect timeout, as the runtime's own pull is
		// for a container without env (docs/contract.md §1).
		if _, perr := rt.outputWithin(ctx, "pull", "--quiet", "--", c.Image); perr != nil {
			return nil, perr
		}
		out, err = inspect()
	}
	if err != nil {
		return nil, err
	}
	entry, cmd, _ := strings.Cut(strings.TrimSpace(string(out)), "\t")
	var entrypoint, imageCmd []string
	if json.Unmarshal([]byte(entry), &entrypoint) != nil || json.Unmarshal([]byte(cmd), &imageCmd) != nil {
		return nil, fmt.Errorf("%s image inspect %s: unexpected output", rt.Name, c.Image)
	}
	if len(c.Args) > 0 {
		// As the runtime reads them: args: [] leaves the image's cmd.
		imageCmd = c.Args
	}
	argv := append(entrypoint, imageCmd...)
	if len(argv) == 0 {
		return nil, fmt.Errorf("image %s has no entrypoint or command, and the manifest sets none (container.command)", c.Image)
	}
	return argv, nil
}

// publishedPort waits until the runtime has published the container's
// port and returns the host address (127.0.0.1:PORT).
func (s *Session) publishedPort(ctx context.Context, ct *container, port int) (string, error) {
	portSpec := strconv.Itoa(port) + "/tcp"
	for {
		out, err := ct.rt.output(ctx, "port", ct.name, portSpec)
		if err == nil {
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if host, p, err := net.SplitHostPort(strings.TrimSpace(line)); err == nil && host == "127.0.0.1" {
					return net.JoinHostPort(host, p), nil
				}
			}
		}
		select {
		case <-s.proc.exited:
			return "", errors.New("the container exited before its port was published")
		default:
		}
		if !pause(ctx) {
			if err == nil {
				err = fmt.Errorf("port %s is not published on 127.0.0.1", portSpec)
			}
			return "", fmt.Errorf("waiting for the container's port: %w", err)
		}
	}
}

// awaitHTTP waits until something answers HTTP at url: the runtime's
// proxy accepts connections on the published port before the server in the
// container listens, and the MCP handshake must not be spent on that.
func (s *Session) awaitHTTP(ctx context.Context, url string) error {
	client := &http.Client{Transport: s.conn.transport, Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			return nil
		}
		select {
		case <-s.proc.exited:
			return errors.New("the container exited before its server answered HTTP")
		default:
		}
		if !pause(ctx) {
			return fmt.Errorf("waiting for the server to answer HTTP: %w", err)
		}
	}
}

// RemoveLeftoverContainers removes the containers that a tether on the
// same state directory (rt.Owner) left when it was killed, and the
// directories of containers that are gone. A container whose tether still
// runs is left alone. It returns the names it removed.
func RemoveLeftoverContainers(ctx context.Context, rt *ContainerRuntime, log *slog.Logger) []string {
	if rt == nil || rt.Owner == "" {
		return nil
	}
	if rt.Dir != "" {
		// No container was started on this state directory since the
		// last search (no mark, no secrets directory): nothing to look
		// for, and no runtime command to run at every start of a tether
		// that has no container servers. The directory is made by the
		// first container start (markUsed): missing, it is empty.
		if entries, err := os.ReadDir(rt.Dir); err == nil && len(entries) == 0 || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	// ps finds them by label; inspect reads each one's tether, in a form
	// docker and podman both write (their ps templates differ).
	out, err := rt.output(ctx, "ps", "--all", "--quiet", "--no-trunc", "--filter=label="+ContainerLabelOwner+"="+rt.Owner)
	if err != nil {
		log.Debug("cannot look for containers a previous tether left", "runtime", rt.Name, "err", err)
		return nil
	}
	var removed []string
	keep := map[string]bool{}
	// Where a process's start time cannot be read (not Linux), this
	// tether's own containers are known by its pid and a start of 0.
	self, _ := startTicks(os.Getpid())
	for _, id := range strings.Fields(string(out)) {
		// One at a time: one that goes meanwhile (this tether's own
		// containers start and stop beside this) fails only its own
		// inspect, where a list would fail for all.
		line, err := rt.output(ctx, "container", "inspect", "--format={{.Name}}\t{{index .Config.Labels \""+containerLabelTether+"\"}}", "--", id)
		if err != nil {
			if !isNoSuchContainer(err) {
				log.Warn("cannot read a container a previous tether may have left", "runtime", rt.Name, "container", id, "err", err)
			}
			continue
		}
		name, owner, _ := strings.Cut(strings.TrimSpace(string(line)), "\t")
		name = strings.TrimPrefix(name, "/") // docker's names start with one
		if name == "" {
			continue
		}
		if pid, start, ok := parseTetherLabel(owner); ok && ((pid == os.Getpid() && start == self) || alive(pid, start)) {
			keep[name] = true
			continue
		}
		ct := &container{rt: rt, name: name, log: log}
		ct.remove()
		removed = append(removed, name)
	}
	if rt.Dir != "" {
		entries, err := os.ReadDir(rt.Dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("cannot read the containers' directory", "dir", rt.Dir, "err", err)
		}
		for _, e := range entries {
			// A directory made since this tether started is for one of
			// its own containers, which may not be listed yet.
			if info, err := e.Info(); err == nil && !keep[e.Name()] && info.ModTime().Before(rt.Started) {
				_ = os.RemoveAll(filepath.Join(rt.Dir, e.Name()))
			}
		}
	}
	return removed
}

// usedMark is the file in the containers' directory that says a container
// was started on this state directory: the next tether's
// RemoveLeftoverContainers looks for leftovers only then, and removes the
// mark with the other entries older than its start.
const usedMark = ".started"

// markUsed leaves usedMark in rt.Dir (when there is one) before a
// container starts.
func (rt *ContainerRuntime) markUsed() {
	if rt.Dir == "" {
		return
	}
	now := time.Now()
	// The state directory makes its subdirectories when it first writes
	// to them: the first container may come before.
	_ = os.MkdirAll(rt.Dir, 0o700)
	p := filepath.Join(rt.Dir, usedMark)
	if err := os.Chtimes(p, now, now); err != nil {
		if f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o600); err == nil {
			f.Close()
		}
	}
}

// parseTetherLabel reads "<pid>-<start ticks>".
func parseTetherLabel(v string) (pid int, start uint64, ok bool) {
	p, s, found := strings.Cut(v, "-")
	if !found {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(s, 10, 64)
	return pid, start, err1 == nil && err2 == nil && pid > 0
}
