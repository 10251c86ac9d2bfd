package spec

// DeepCopy returns a copy that shares no memory with c, so a holder of a
// cached connection can hand it out without anyone mutating the cache.
func (c *McpConnection) DeepCopy() *McpConnection {
	if c == nil {
		return nil
	}
	out := *c
	if c.Metadata.Labels != nil {
		out.Metadata.Labels = make(map[string]string, len(c.Metadata.Labels))
		for k, v := range c.Metadata.Labels {
			out.Metadata.Labels[k] = v
		}
	}
	out.Spec = *c.Spec.DeepCopy()
	return &out
}

// DeepCopy returns a copy of s that shares no memory with it.
func (s *Spec) DeepCopy() *Spec {
	if s == nil {
		return nil
	}
	out := *s
	if s.Stdio != nil {
		st := *s.Stdio
		st.Args = cloneStrings(s.Stdio.Args)
		st.Env = cloneEnv(s.Stdio.Env)
		st.Sandbox = s.Stdio.Sandbox.DeepCopy()
		out.Stdio = &st
	}
	if s.HTTP != nil {
		h := *s.HTTP
		h.Headers = cloneEnv(s.HTTP.Headers)
		h.OAuth = s.HTTP.OAuth.DeepCopy()
		out.HTTP = &h
	}
	if s.Container != nil {
		c := *s.Container
		c.Command = cloneStrings(s.Container.Command)
		c.Args = cloneStrings(s.Container.Args)
		c.Env = cloneEnv(s.Container.Env)
		c.SecretFiles = cloneEnv(s.Container.SecretFiles)
		if s.Container.Mounts != nil {
			c.Mounts = append([]Mount(nil), s.Container.Mounts...)
		}
		c.Pids = clonePtr(s.Container.Pids)
		out.Container = &c
	}
	out.ToolPrefix = clonePtr(s.ToolPrefix)
	if s.Tools != nil {
		out.Tools = &ToolFilter{Allow: cloneStrings(s.Tools.Allow), Deny: cloneStrings(s.Tools.Deny)}
	}
	if s.HealthCheck != nil {
		out.HealthCheck = &HealthCheck{
			Interval:         clonePtr(s.HealthCheck.Interval),
			Timeout:          clonePtr(s.HealthCheck.Timeout),
			FailureThreshold: clonePtr(s.HealthCheck.FailureThreshold),
		}
	}
	if s.Backoff != nil {
		out.Backoff = &Backoff{Initial: clonePtr(s.Backoff.Initial), Max: clonePtr(s.Backoff.Max)}
	}
	out.CallTimeout = clonePtr(s.CallTimeout)
	if s.Lifecycle != nil {
		l := *s.Lifecycle
		l.IdleTimeout = clonePtr(s.Lifecycle.IdleTimeout)
		out.Lifecycle = &l
	}
	return &out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

func cloneEnv(env []EnvVar) []EnvVar {
	if env == nil {
		return nil
	}
	out := make([]EnvVar, len(env))
	for i, e := range env {
		out[i] = EnvVar{Name: e.Name, Value: clonePtr(e.Value)}
		if e.ValueFrom != nil {
			vf := *e.ValueFrom
			vf.SecretKeyRef = clonePtr(e.ValueFrom.SecretKeyRef)
			out[i].ValueFrom = &vf
		}
	}
	return out
}

// DeepCopy returns a copy of o that shares no memory with it.
func (o *OAuthSpec) DeepCopy() *OAuthSpec {
	if o == nil {
		return nil
	}
	out := &OAuthSpec{}
	if cc := o.ClientCredentials; cc != nil {
		out.ClientCredentials = &OAuthClientCredentials{
			ClientID:     cc.ClientID,
			ClientSecret: *cc.ClientSecret.DeepCopy(),
			Scopes:       cloneStrings(cc.Scopes),
		}
	}
	if ac := o.AuthorizationCode; ac != nil {
		out.AuthorizationCode = &OAuthAuthorizationCode{
			Scopes:       cloneStrings(ac.Scopes),
			ClientID:     ac.ClientID,
			ClientSecret: ac.ClientSecret.DeepCopy(),
		}
	}
	return out
}

// DeepCopy returns a copy of s that shares no memory with it.
func (s *SecretValue) DeepCopy() *SecretValue {
	if s == nil {
		return nil
	}
	return &SecretValue{Value: clonePtr(s.Value), ValueFrom: clonePtr(s.ValueFrom)}
}
