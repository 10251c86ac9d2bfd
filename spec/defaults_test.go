package spec

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestAccessorsDefaults(t *testing.T) {
	var s Spec
	got := []any{s.HealthInterval(), s.HealthTimeout(), s.FailureThreshold(), s.BackoffInitial(), s.BackoffMax(), s.CallTimeoutDuration(), s.TransportName()}
	want := []any{30 * time.Second, 5 * time.Second, 3, 100 * time.Millisecond, 3 * time.Second, 60 * time.Second, ""}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults = %v, want %v", got, want)
	}
	n := 7
	s = Spec{
		HTTP:        &HTTPSpec{URL: "http://h", Transport: TransportSSE},
		HealthCheck: &HealthCheck{Interval: &Duration{time.Second}, Timeout: &Duration{2 * time.Second}, FailureThreshold: &n},
		Backoff:     &Backoff{Initial: &Duration{time.Millisecond}, Max: &Duration{time.Hour}},
		CallTimeout: &Duration{time.Minute},
	}
	got = []any{s.HealthInterval(), s.HealthTimeout(), s.FailureThreshold(), s.BackoffInitial(), s.BackoffMax(), s.CallTimeoutDuration(), s.TransportName()}
	want = []any{time.Second, 2 * time.Second, 7, time.Millisecond, time.Hour, time.Minute, "sse"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("set values = %v, want %v", got, want)
	}
}

func TestTransportName(t *testing.T) {
	tests := []struct {
		spec Spec
		want string
	}{
		{Spec{Stdio: &StdioSpec{Command: "a"}}, "stdio"},
		{Spec{HTTP: &HTTPSpec{URL: "u"}}, "streamable"},
		{Spec{HTTP: &HTTPSpec{URL: "u", Transport: "streamable"}}, "streamable"},
		{Spec{HTTP: &HTTPSpec{URL: "u", Transport: "sse"}}, "sse"},
		{Spec{Container: &ContainerSpec{Image: "i"}}, "container"},
		{Spec{}, ""},
	}
	for _, tt := range tests {
		if got := tt.spec.TransportName(); got != tt.want {
			t.Errorf("TransportName(%+v) = %q, want %q", tt.spec, got, tt.want)
		}
	}
}

func TestToolPrefix(t *testing.T) {
	empty, custom := "", "gh"
	tests := []struct {
		name   string
		prefix *string
		want   string
	}{
		{"absent is the name", nil, "github"},
		{"explicit empty stays empty", &empty, ""},
		{"explicit", &custom, "gh"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &McpConnection{Metadata: ObjectMeta{Name: "github"}, Spec: Spec{Stdio: &StdioSpec{Command: "a"}, ToolPrefix: tt.prefix}}
			if got := c.ToolPrefix(); got != tt.want {
				t.Errorf("ToolPrefix() = %q, want %q", got, tt.want)
			}
			c.Default()
			c.Default() // idempotent
			if got := c.ToolPrefix(); got != tt.want {
				t.Errorf("after Default, ToolPrefix() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestToolPrefixEmptySurvivesDecoding(t *testing.T) {
	docs := DecodeFile("m.yaml", []byte(withSpec("stdio: {command: a}\ntoolPrefix: \"\"")))
	if docs[0].Conn == nil {
		t.Fatal(docs[0].Errors)
	}
	if p := docs[0].Conn.Spec.ToolPrefix; p == nil || *p != "" || docs[0].Conn.ToolPrefix() != "" {
		t.Errorf("toolPrefix: \"\" became %v", p)
	}
}

func TestAllows(t *testing.T) {
	tests := []struct {
		name   string
		filter *ToolFilter
		tool   string
		want   bool
	}{
		{"nil filter allows all", nil, "anything", true},
		{"empty filter allows all", &ToolFilter{}, "anything", true},
		{"allow matches", &ToolFilter{Allow: []string{"get_*"}}, "get_issue", true},
		{"allow misses", &ToolFilter{Allow: []string{"get_*"}}, "delete_issue", false},
		{"second allow matches", &ToolFilter{Allow: []string{"x", "search?"}}, "search1", true},
		{"deny only", &ToolFilter{Deny: []string{"delete_*"}}, "delete_repo", false},
		{"deny only lets others through", &ToolFilter{Deny: []string{"delete_*"}}, "get_repo", true},
		{"deny wins over allow", &ToolFilter{Allow: []string{"*"}, Deny: []string{"delete_*"}}, "delete_repo", false},
		{"glob is anchored", &ToolFilter{Allow: []string{"get"}}, "get_issue", false},
		{"class", &ToolFilter{Allow: []string{"[a-c]*"}}, "beta", true},
		{"star does not cross slash", &ToolFilter{Allow: []string{"*"}}, "a/b", false},
		{"bad pattern matches nothing", &ToolFilter{Allow: []string{"[a"}}, "a", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.filter.Allows(tt.tool); got != tt.want {
				t.Errorf("Allows(%q) = %v, want %v", tt.tool, got, tt.want)
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	b, err := json.Marshal(struct {
		D  Duration  `json:"d"`
		P  *Duration `json:"p"`
		NP *Duration `json:"np"`
	}{Duration{100 * time.Millisecond}, &Duration{90 * time.Second}, nil})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"d":"100ms","p":"1m30s","np":null}`; string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{`"1m30s"`, 90 * time.Second, ""},
		{`"100ms"`, 100 * time.Millisecond, ""},
		{`null`, 0, ""},
		{`"3x"`, 0, `invalid duration "3x": unknown unit "x" in duration`},
		{`30`, 0, `duration must be a string such as "30s": 30`},
	}
	for _, tt := range tests {
		var d Duration
		err := json.Unmarshal([]byte(tt.in), &d)
		if gotErr := errString(err); gotErr != tt.wantErr || d.Duration != tt.want {
			t.Errorf("Unmarshal(%s) = %v, %q; want %v, %q", tt.in, d.Duration, gotErr, tt.want, tt.wantErr)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestDeepCopyIsIndependent(t *testing.T) {
	c := baseConn(t)
	before := c.Spec.Hash()
	cp := c.DeepCopy()
	if !reflect.DeepEqual(c, cp) {
		t.Fatal("copy differs")
	}
	cp.Metadata.Labels["team"] = "b"
	cp.Spec.Stdio.Args[0] = "changed"
	*cp.Spec.Stdio.Env[0].Value = "changed"
	cp.Spec.Stdio.Env[1].ValueFrom.File = "changed"
	*cp.Spec.ToolPrefix = "changed"
	cp.Spec.Tools.Allow[0] = "changed"
	cp.Spec.HealthCheck.Interval.Duration = time.Hour
	*cp.Spec.HealthCheck.FailureThreshold = 99
	cp.Spec.Backoff.Max.Duration = time.Hour
	cp.Spec.CallTimeout.Duration = time.Hour
	if c.Spec.Hash() != before || c.Metadata.Labels["team"] != "a" {
		t.Error("changing the copy changed the original")
	}
}

func TestDefaultFillsEffectiveValues(t *testing.T) {
	c := &McpConnection{Metadata: ObjectMeta{Name: "x"}, Spec: Spec{HTTP: &HTTPSpec{URL: "http://h"}}}
	c.Default()
	s := c.Spec
	if s.HTTP.Transport != TransportStreamable || *s.ToolPrefix != "x" || s.Tools != nil ||
		s.HealthCheck.Interval.Duration != DefaultHealthInterval || s.HealthCheck.Timeout.Duration != DefaultHealthTimeout ||
		*s.HealthCheck.FailureThreshold != DefaultFailureThreshold || s.Backoff.Initial.Duration != DefaultBackoffInitial ||
		s.Backoff.Max.Duration != DefaultBackoffMax || s.CallTimeout.Duration != DefaultCallTimeout {
		t.Errorf("Default() = %+v", s)
	}
}

func TestSecretKeyRefs(t *testing.T) {
	docs := DecodeFile("m.yaml", []byte(withSpec(`stdio:
  command: srv
  env:
    - {name: A, valueFrom: {secretKeyRef: {name: tok, key: b}}}
    - {name: B, valueFrom: {secretKeyRef: {name: app, key: z}}}
    - {name: C, valueFrom: {secretKeyRef: {name: tok, key: b}}}
    - {name: D, valueFrom: {secretKeyRef: {name: tok, key: a}}}
    - {name: E, valueFrom: {file: /f}}
    - {name: F, value: x}`)))
	if len(docs) != 1 || docs[0].Conn == nil {
		t.Fatalf("decode: %+v", docs)
	}
	got := docs[0].Conn.Spec.SecretKeyRefs()
	want := []SecretKeySelector{{"app", "z"}, {"tok", "a"}, {"tok", "b"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SecretKeyRefs = %v, want %v", got, want)
	}

	// The copy of a secretKeyRef is the copy's own.
	cp := docs[0].Conn.DeepCopy()
	cp.Spec.Stdio.Env[0].ValueFrom.SecretKeyRef.Name = "changed"
	if docs[0].Conn.Spec.Stdio.Env[0].ValueFrom.SecretKeyRef.Name != "tok" {
		t.Error("changing the copy's secretKeyRef changed the original")
	}
	// A rotation is not a spec change, but pointing at another key is.
	if cp.Spec.ConnectHash() == docs[0].Conn.Spec.ConnectHash() {
		t.Error("ConnectHash ignores secretKeyRef")
	}

	none := DecodeFile("m.yaml", []byte(withSpec("http: {url: http://h/mcp}")))
	if refs := none[0].Conn.Spec.SecretKeyRefs(); refs != nil {
		t.Errorf("SecretKeyRefs of a spec without any = %v", refs)
	}
}

// TestContainerSpecHelpers: what a container spec gives its readers (the
// transport, status and the runtime's command line), defaults included,
// and that a copy of it shares nothing with it.
func TestContainerSpecHelpers(t *testing.T) {
	for _, tt := range []struct {
		spec Spec
		want bool
	}{
		{Spec{Stdio: &StdioSpec{Command: "a"}}, true},
		{Spec{Container: &ContainerSpec{Image: "i"}}, true},
		{Spec{HTTP: &HTTPSpec{URL: "u"}}, false},
	} {
		if got := tt.spec.RunsProcess(); got != tt.want {
			t.Errorf("RunsProcess(%s) = %v, want %v", tt.spec.TransportName(), got, tt.want)
		}
	}
	c := &ContainerSpec{Image: "i"}
	if c.MemoryBytes() != DefaultContainerMemory || c.PidsLimit() != DefaultContainerPids || c.NetworkMode() != ContainerNetworkNone || c.EndpointPath() != "/mcp" {
		t.Errorf("defaults: memory %d, pids %d, network %q, path %q", c.MemoryBytes(), c.PidsLimit(), c.NetworkMode(), c.EndpointPath())
	}
	pids := 7
	c = &ContainerSpec{Image: "i", Memory: "2Gi", Pids: &pids, Network: "bridge", Port: 80, Path: "/v1"}
	if c.MemoryBytes() != 2<<30 || c.PidsLimit() != 7 || c.NetworkMode() != "bridge" || c.EndpointPath() != "/v1" {
		t.Errorf("set: memory %d, pids %d, network %q, path %q", c.MemoryBytes(), c.PidsLimit(), c.NetworkMode(), c.EndpointPath())
	}
	if n, err := ParseMemory("8589934592Gi"); err != nil || n != 1<<63 {
		t.Errorf("ParseMemory at the largest size: %d, %v", n, err)
	}
	for in, want := range map[string]string{"1024Mi": "1Gi", "512Mi": "512Mi", "1536Ki": "1536Ki", "2048": "2Ki", "1000": "1000"} {
		n, err := ParseMemory(in)
		if err != nil || FormatMemory(n) != want {
			t.Errorf("FormatMemory(ParseMemory(%q)) = %q (%v), want %q", in, FormatMemory(n), err, want)
		}
	}

	v := "s3cret"
	sp := &Spec{Container: &ContainerSpec{Image: "i", Command: []string{"a"}, Args: []string{"b"}, Pids: &pids,
		Env:         []EnvVar{{Name: "E", Value: &v}},
		SecretFiles: []EnvVar{{Name: "f", ValueFrom: &ValueFrom{SecretKeyRef: &SecretKeySelector{Name: "s", Key: "k"}}}},
		Mounts:      []Mount{{Source: "/a", Target: "/a"}}}}
	if refs := sp.SecretKeyRefs(); len(refs) != 1 || refs[0] != (SecretKeySelector{Name: "s", Key: "k"}) {
		t.Errorf("SecretKeyRefs = %v, want the secret file's", refs)
	}
	before := sp.Hash()
	cp := sp.DeepCopy()
	cp.Container.Command[0], cp.Container.Args[0] = "x", "x"
	*cp.Container.Pids = 99
	*cp.Container.Env[0].Value = "x"
	cp.Container.SecretFiles[0].ValueFrom.SecretKeyRef.Name = "x"
	cp.Container.Mounts[0].Writable = true
	if sp.Hash() != before {
		t.Error("changing the copy changed the original container")
	}
}
