package connection

import (
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// RunContainerInit is `tether container-init ENVFILE -- COMMAND...`, the
// entrypoint of a container server that has env (container.go): it adds
// the variables of ENVFILE (a JSON list of NAME=value, written by tether
// and mounted read-only) to the environment the runtime gave it (the
// image's), and execs COMMAND with them. It runs inside the container,
// so it reads nothing else and returns only when it cannot exec.
func RunContainerInit(args []string) error {
	if len(args) < 3 || args[1] != "--" {
		return errors.New("usage: tether " + ContainerInitCommand + " ENVFILE -- COMMAND [ARG...]")
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	var add []string
	if err := json.Unmarshal(data, &add); err != nil {
		return fmt.Errorf("%s: %w", args[0], err) // the content is never quoted
	}
	env := mergeEnv(os.Environ(), add)
	argv := args[2:]
	path := argv[0]
	if !strings.Contains(path, "/") {
		if path, err = lookPathIn(path, envValue(env, "PATH")); err != nil {
			return err
		}
	}
	return execve(path, argv, env)
}

// mergeEnv is base with the entries of add, which win.
func mergeEnv(base, add []string) []string {
	out := make([]string, 0, len(base)+len(add))
	index := map[string]int{}
	for _, kv := range append(append([]string(nil), base...), add...) {
		name, _, _ := strings.Cut(kv, "=")
		if i, ok := index[name]; ok {
			out[i] = kv
			continue
		}
		index[name] = len(out)
		out = append(out, kv)
	}
	return out
}

// lookPathIn finds an executable name in the directories of path.
func lookPathIn(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found on the container's PATH", name)
}

// staticLinuxProblem says why the executable at path cannot run in any
// Linux container of this machine's architecture: not a Linux ELF file, or
// linked dynamically (a scratch image has no libc); "" when it can.
func staticLinuxProblem(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return "tether is not a Linux executable (" + filepath.Base(path) + "), so it cannot set env inside a Linux container"
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "tether is linked dynamically (built with cgo), so it cannot run inside any container; a static build (CGO_ENABLED=0, as releases are) can"
		}
	}
	return ""
}
