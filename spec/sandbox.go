package spec

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DeepCopy returns a copy of p that shares no memory with it. An empty
// grants list stays empty (not absent): it grants nothing. (Grants has no
// omitempty for the same reason: [] must survive the JSON that hashes and
// the state directory's last valid spec are made of.)
func (p *SandboxSpec) DeepCopy() *SandboxSpec {
	if p == nil {
		return nil
	}
	out := *p
	if p.Grants != nil {
		out.Grants = append([]string{}, p.Grants...)
	}
	out.Read = cloneStrings(p.Read)
	out.Write = cloneStrings(p.Write)
	out.Execute = cloneStrings(p.Execute)
	out.Connect = cloneStrings(p.Connect)
	if p.Limits != nil {
		l := *p.Limits
		l.Processes = clonePtr(p.Limits.Processes)
		l.OpenFiles = clonePtr(p.Limits.OpenFiles)
		out.Limits = &l
	}
	return &out
}

// Granted reports whether the policy grants name (SandboxGrants): all of
// them when the list is absent.
func (p *SandboxSpec) Granted(name string) bool {
	if p.Grants == nil {
		return true
	}
	return slices.Contains(p.Grants, name)
}

// NetworkMode is the policy's network, defaulted (none).
func (p *SandboxSpec) NetworkMode() string {
	if p.Network == "" {
		return NetworkNone
	}
	return p.Network
}

// ConnectRule is one entry of SandboxSpec.Connect: a TCP port, and the host
// it names ("" for any).
type ConnectRule struct {
	Host string
	Port uint16
}

// ParseConnect reads one connect entry: "443" or "host:443" ("[::1]:443").
func ParseConnect(s string) (ConnectRule, error) {
	host, port := "", s
	if strings.Contains(s, ":") {
		h, p, err := net.SplitHostPort(s)
		if err != nil {
			return ConnectRule{}, fmt.Errorf("%s is neither a port nor host:port", truncateQuote(s))
		}
		if h == "" {
			return ConnectRule{}, fmt.Errorf("%s has an empty host: write the port alone", truncateQuote(s))
		}
		host, port = h, p
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return ConnectRule{}, fmt.Errorf("%s: the port must be a number from 1 to 65535", truncateQuote(s))
	}
	return ConnectRule{Host: host, Port: uint16(n)}, nil
}

// sandbox checks spec.stdio.sandbox: the platform has it, the grant names,
// paths, network mode and its ports, and the limits.
func (v validator) sandbox(field string, p *SandboxSpec) {
	if !SandboxSupported {
		v.errorf(cmp.Or(field, "sandbox"), "not supported on %s: the sandbox needs Linux (Landlock and namespaces); remove the field, or run this server on Linux (docs/security.md)", sandboxPlatform)
		return
	}
	for i, g := range p.Grants {
		if !slices.Contains(SandboxGrants, g) {
			v.errorf(fmt.Sprintf("%s[%d]", join(field, "grants"), i), "unknown grant %s (want one of %s)", truncateQuote(g), strings.Join(SandboxGrants, ", "))
		}
	}
	for _, list := range []struct {
		name  string
		paths []string
	}{{"read", p.Read}, {"write", p.Write}, {"execute", p.Execute}} {
		for i, path := range list.paths {
			f := fmt.Sprintf("%s[%d]", join(field, list.name), i)
			switch {
			case path == "":
				v.errorf(f, "empty path")
			case strings.ContainsRune(path, 0):
				v.errorf(f, "must not contain a NUL character")
			case strings.HasPrefix(path, "~") && path != "~" && !strings.HasPrefix(path, "~/"):
				v.errorf(f, "%s: only ~/ (tether's HOME) is expanded, not ~user", truncateQuote(path))
			}
		}
	}
	mode := p.NetworkMode()
	validMode := true
	switch mode {
	case NetworkNone, NetworkLoopback, NetworkConnect, NetworkAll:
	default:
		validMode = false
		v.errorf(join(field, "network"), "%s is not one of none, loopback, connect, all", truncateQuote(p.Network))
	}
	switch {
	case !validMode:
		// What connect and dns go with is unknown: network says what to fix.
	case mode == NetworkConnect && len(p.Connect) == 0:
		v.errorf(join(field, "connect"), "required with network connect: the ports the server may connect to (\"443\" or \"host:443\")")
	case mode != NetworkConnect && len(p.Connect) > 0:
		v.errorf(join(field, "connect"), "applies to network connect only (network is %s)", mode)
	}
	for i, c := range p.Connect {
		if _, err := ParseConnect(c); err != nil {
			v.errorf(fmt.Sprintf("%s[%d]", join(field, "connect"), i), "%v", err)
		}
	}
	if p.DNS && validMode && mode != NetworkConnect {
		v.errorf(join(field, "dns"), "applies to network connect only (none and loopback have no DNS server to reach, all reaches it anyway)")
	}
	if l := p.Limits; l != nil {
		if l.Memory != "" {
			if _, err := ParseMemory(l.Memory); err != nil {
				v.errorf(join(field, "limits.memory"), "%v", err)
			}
		}
		if l.Processes != nil && *l.Processes < 1 {
			v.errorf(join(field, "limits.processes"), "must be at least 1, got %d", *l.Processes)
		}
		if l.OpenFiles != nil && *l.OpenFiles < 3 {
			v.errorf(join(field, "limits.openFiles"), "must be at least 3 (stdin, stdout, stderr), got %d", *l.OpenFiles)
		}
	}
}

// DecodeSandboxPolicy reads a sandbox policy file (tether run
// --default-sandbox): one YAML mapping with spec.stdio.sandbox's fields,
// decoded as strictly as a manifest and validated alike. Each problem names
// the file, its line and the field.
func DecodeSandboxPolicy(file string, data []byte) (*SandboxSpec, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: file is %d bytes, over the limit of %d", file, len(data), MaxFileSize)
	}
	if line, msg := binaryContent(data); msg != "" {
		return nil, fmt.Errorf("%s:%d: %s", file, line, msg)
	}
	d := &docDecoder{file: file, docLine: 1, failed: map[string]bool{}}
	var root yaml.Node
	var policy SandboxSpec
	switch err := yaml.Unmarshal(data, &root); {
	case err != nil:
		d.syntaxError(err)
	case len(root.Content) == 0 || isImplicitNull(root.Content[0]):
		d.errorf(nil, "", "empty: a sandbox policy is a mapping of spec.stdio.sandbox's fields")
	default:
		d.value(root.Content[0], reflect.ValueOf(&policy).Elem(), "")
		if !d.aborted {
			validator{d}.sandbox("", &policy)
		}
	}
	if errs := d.finish(); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = fmt.Sprintf("%s:%d: %s", file, e.Line, strings.TrimPrefix(e.Field+": ", ": ")+e.Msg)
		}
		return nil, errors.New(strings.Join(msgs, "\n"))
	}
	return &policy, nil
}
