package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Hash returns "sha256:<hex>" over a canonical encoding of the spec with its
// defaults applied: the same for the same spec whatever the key order,
// quoting, comments or spelling of durations ("90s" and "1m30s"), and for a
// default written out or left implicit.
//
// The encoding includes plain `value:` env and header values. That does not
// expose them further: whoever can read the hash (status beside the manifest)
// can read the manifest that holds those values in clear text. Values read
// through valueFrom are not part of the spec, so only their source counts.
func (s *Spec) Hash() string { return digest(s.hashView()) }

// hashView is the spec as Hash sees it: a copy with its defaults applied
// and the ways of writing nothing made one.
func (s *Spec) hashView() *Spec {
	c := s.DeepCopy()
	c.defaultSpec()
	if c.Tools != nil && len(c.Tools.Allow) == 0 && len(c.Tools.Deny) == 0 {
		c.Tools = nil // `tools: {}` filters nothing, like no tools at all
	}
	if l := c.Lifecycle; l != nil { // the defaults, written out or left implicit
		if l.Mode == "" {
			l.Mode = LifecycleAlways
		}
		switch {
		case l.Mode == LifecycleAlways && l.IdleTimeout == nil:
			c.Lifecycle = nil
		case l.IdleTimeout == nil:
			l.IdleTimeout = &Duration{DefaultIdleTimeout}
		}
	}
	return c
}

// ConnectHash covers only what needs a reconnect when it changes: the
// transport kind, command, args, workingDir, env (names and value sources),
// url, http transport and headers, and every field of a container (with its
// defaults applied: a default written out is no change). A change of anything else (filters,
// prefix, health, backoff, call timeout, suspend) applies in place.
func (s *Spec) ConnectHash() string { return digest(s.connectView()) }

// connectView is the part of the spec ConnectHash covers.
type connectView struct {
	Stdio     *StdioSpec     `json:"stdio,omitempty"`
	HTTP      *HTTPSpec      `json:"http,omitempty"`
	Container *ContainerSpec `json:"container,omitempty"`
}

func (s *Spec) connectView() connectView {
	c := connectView{Stdio: s.Stdio, HTTP: s.HTTP, Container: s.Container.withDefaults()}
	if s.HTTP != nil && s.HTTP.Transport == "" {
		h := *s.HTTP
		h.Transport = TransportStreamable
		c.HTTP = &h
	}
	return c
}

// SessionKey is what a live session is kept for: the connect-relevant spec
// and the directory its relative paths resolve against (a manifest moved
// to another directory resolves its relative command anew). When it
// changes, tether run replaces the session (controller/supervisor's Want);
// tether diff calls it to predict that (docs/contract.md §2).
func SessionKey(s *Spec, dir string) string { return s.ConnectHash() + "|" + dir }

// digest hashes the JSON encoding of v. encoding/json writes struct fields in
// declaration order and map keys sorted, and Duration in its canonical
// String form, so equal specs encode to equal bytes.
func digest(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only unsupported types can fail, and the spec has none.
		panic("spec: hashing: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
