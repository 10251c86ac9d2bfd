package spec

import (
	"cmp"
	"path"
	"slices"
	"time"
)

// Default fills every optional field that has a default, so the object shows
// the effective configuration. It is idempotent and keeps what was set:
// an explicit `toolPrefix: ""` stays empty, and Tools stays nil (all tools).
func (c *McpConnection) Default() {
	s := &c.Spec
	if s.ToolPrefix == nil {
		p := c.Metadata.Name
		s.ToolPrefix = &p
	}
	s.defaultSpec()
}

// defaultSpec applies the defaults that do not depend on metadata.
func (s *Spec) defaultSpec() {
	if s.HTTP != nil && s.HTTP.Transport == "" {
		s.HTTP.Transport = TransportStreamable
	}
	s.Container = s.Container.withDefaults()
	if s.HealthCheck == nil {
		s.HealthCheck = &HealthCheck{}
	}
	hc := s.HealthCheck
	if hc.Interval == nil {
		hc.Interval = &Duration{DefaultHealthInterval}
	}
	if hc.Timeout == nil {
		hc.Timeout = &Duration{DefaultHealthTimeout}
	}
	if hc.FailureThreshold == nil {
		n := DefaultFailureThreshold
		hc.FailureThreshold = &n
	}
	if s.Backoff == nil {
		s.Backoff = &Backoff{}
	}
	if s.Backoff.Initial == nil {
		s.Backoff.Initial = &Duration{DefaultBackoffInitial}
	}
	if s.Backoff.Max == nil {
		s.Backoff.Max = &Duration{DefaultBackoffMax}
	}
	if s.CallTimeout == nil {
		s.CallTimeout = &Duration{DefaultCallTimeout}
	}
}

// ToolPrefix is the prefix of the exposed tool names: metadata.name unless
// spec.toolPrefix is set. An explicit "" means names are exposed unchanged.
func (c *McpConnection) ToolPrefix() string {
	if c.Spec.ToolPrefix != nil {
		return *c.Spec.ToolPrefix
	}
	return c.Metadata.Name
}

// HealthInterval is the time between two health checks of a connected session.
func (s *Spec) HealthInterval() time.Duration {
	if s.HealthCheck != nil && s.HealthCheck.Interval != nil {
		return s.HealthCheck.Interval.Duration
	}
	return DefaultHealthInterval
}

// HealthTimeout bounds one health check.
func (s *Spec) HealthTimeout() time.Duration {
	if s.HealthCheck != nil && s.HealthCheck.Timeout != nil {
		return s.HealthCheck.Timeout.Duration
	}
	return DefaultHealthTimeout
}

// FailureThreshold is how many health checks in a row must fail before the
// connection is considered broken.
func (s *Spec) FailureThreshold() int {
	if s.HealthCheck != nil && s.HealthCheck.FailureThreshold != nil {
		return *s.HealthCheck.FailureThreshold
	}
	return DefaultFailureThreshold
}

// BackoffInitial is the first reconnect delay.
func (s *Spec) BackoffInitial() time.Duration {
	if s.Backoff != nil && s.Backoff.Initial != nil {
		return s.Backoff.Initial.Duration
	}
	return DefaultBackoffInitial
}

// BackoffMax caps the reconnect delay.
func (s *Spec) BackoffMax() time.Duration {
	if s.Backoff != nil && s.Backoff.Max != nil {
		return s.Backoff.Max.Duration
	}
	return DefaultBackoffMax
}

// CallTimeoutDuration bounds one tools/call through the gateway.
func (s *Spec) CallTimeoutDuration() time.Duration {
	if s.CallTimeout != nil {
		return s.CallTimeout.Duration
	}
	return DefaultCallTimeout
}

// OnDemand reports whether the server runs only when a call needs it.
func (s *Spec) OnDemand() bool {
	return s.Lifecycle != nil && s.Lifecycle.Mode == LifecycleOnDemand
}

// IdleTimeout is how long an OnDemand server may stay unused before it is
// stopped. Lifecycle is not filled in by Default, so that a manifest that
// does not mention it keeps its spec hash.
func (s *Spec) IdleTimeout() time.Duration {
	if s.Lifecycle != nil && s.Lifecycle.IdleTimeout != nil {
		return s.Lifecycle.IdleTimeout.Duration
	}
	return DefaultIdleTimeout
}

// Transport kinds as TransportName reports them.
const (
	TransportStdio     = "stdio"
	TransportContainer = "container"
)

// TransportName is "stdio", "streamable", "sse" or "container"; "" when no
// transport is set (only possible for a spec that did not validate).
func (s *Spec) TransportName() string {
	switch {
	case s.Stdio != nil:
		return TransportStdio
	case s.Container != nil:
		return TransportContainer
	case s.HTTP != nil && s.HTTP.Transport == "":
		return TransportStreamable
	case s.HTTP != nil:
		return s.HTTP.Transport
	}
	return ""
}

// Allows reports whether the filter exposes a tool, by the server's own tool
// name. A nil filter or an empty allow list allows every tool; deny wins.
func (f *ToolFilter) Allows(tool string) bool {
	if f == nil {
		return true
	}
	for _, p := range f.Deny {
		if ok, _ := path.Match(p, tool); ok {
			return false
		}
	}
	if len(f.Allow) == 0 {
		return true
	}
	for _, p := range f.Allow {
		if ok, _ := path.Match(p, tool); ok {
			return true
		}
	}
	return false
}

// SecretKeyRefs lists the Secret keys the spec reads (valueFrom.secretKeyRef
// of env entries and headers), each once, sorted by Secret name then key.
func (s *Spec) SecretKeyRefs() []SecretKeySelector {
	var vars []EnvVar
	if s.Stdio != nil {
		vars = s.Stdio.Env
	}
	if s.HTTP != nil {
		vars = append(slices.Clip(vars), s.HTTP.Headers...)
	}
	if s.Container != nil {
		vars = append(slices.Clip(vars), s.Container.Env...)
		vars = append(slices.Clip(vars), s.Container.SecretFiles...)
	}
	var refs []SecretKeySelector
	for _, v := range vars {
		if v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil && !slices.Contains(refs, *v.ValueFrom.SecretKeyRef) {
			refs = append(refs, *v.ValueFrom.SecretKeyRef)
		}
	}
	slices.SortFunc(refs, func(a, b SecretKeySelector) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Key, b.Key))
	})
	return refs
}

// RunsProcess reports whether tether runs the server itself (a stdio child,
// or a container through the runtime's command): such a connection has
// process facts (status.process) and counts its restarts.
func (s *Spec) RunsProcess() bool { return s.Stdio != nil || s.Container != nil }

// withDefaults returns a copy of c with its defaults filled in and its
// memory limit written one way (1Gi, not 1024Mi), so that a default
// written out, or a limit spelt another way, is no change; nil for nil.
func (c *ContainerSpec) withDefaults() *ContainerSpec {
	if c == nil {
		return nil
	}
	out := *c
	if out.Network == "" {
		out.Network = ContainerNetworkNone
	}
	if out.Memory == "" {
		out.Memory = FormatMemory(DefaultContainerMemory)
	} else if n, err := ParseMemory(out.Memory); err == nil {
		out.Memory = FormatMemory(n)
	}
	if out.Pids == nil {
		n := DefaultContainerPids
		out.Pids = &n
	}
	if out.Port != 0 && out.Path == "" {
		out.Path = DefaultContainerPath
	}
	return &out
}

// MemoryBytes is the container's memory limit in bytes (the default when
// none is set or it does not parse: validation reports that).
func (c *ContainerSpec) MemoryBytes() uint64 {
	if n, err := ParseMemory(c.Memory); err == nil && c.Memory != "" {
		return n
	}
	return DefaultContainerMemory
}

// PidsLimit is the most processes the container may run.
func (c *ContainerSpec) PidsLimit() int {
	if c.Pids != nil {
		return *c.Pids
	}
	return DefaultContainerPids
}

// NetworkMode is the container's network: none unless set.
func (c *ContainerSpec) NetworkMode() string { return cmp.Or(c.Network, ContainerNetworkNone) }

// EndpointPath is the path of a port server's MCP endpoint.
func (c *ContainerSpec) EndpointPath() string { return cmp.Or(c.Path, DefaultContainerPath) }
