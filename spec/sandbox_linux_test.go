package spec

import (
	"encoding/json"
	"strings"
	"testing"
)

func sandboxManifest(policy string) string {
	return "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: s\nspec:\n  stdio:\n    command: server\n    sandbox:\n" + policy
}

// TestSandboxValidation: each bad field of spec.stdio.sandbox is named, with
// what is wrong; a good policy decodes whole.
func TestSandboxValidation(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
		want         []string // one problem each, "field: message part"
	}{
		{"a full policy", "      grants: [command, libraries]\n      read: [~/data, ./config, /etc/ssl]\n      write: [/tmp/out]\n      execute: [/usr/bin/git]\n      network: connect\n      connect: [\"443\", \"api.example.com:8443\", \"[::1]:80\"]\n      dns: true\n      limits: {memory: 2Gi, processes: 64, openFiles: 256}\n      bestEffort: true\n", nil},
		{"empty: network none, every grant", "      {}\n", nil},
		{"unknown grant", "      grants: [command, home]\n", []string{`spec.stdio.sandbox.grants[1]: unknown grant "home"`}},
		{"empty path", "      read: [\"\"]\n", []string{"spec.stdio.sandbox.read[0]: empty path"}},
		{"~user", "      write: [\"~root/x\"]\n", []string{"spec.stdio.sandbox.write[0]: \"~root/x\": only ~/"}},
		{"NUL", "      execute: [\"/bin/\\0sh\"]\n", []string{"spec.stdio.sandbox.execute[0]: must not contain a NUL"}},
		{"unknown network", "      network: internet\n", []string{`spec.stdio.sandbox.network: "internet" is not one of none, loopback, connect, all`}},
		{"unknown network, with ports and dns", "      network: internet\n      connect: [\"80\"]\n      dns: true\n", []string{`spec.stdio.sandbox.network: "internet" is not one of`}},
		{"connect without ports", "      network: connect\n", []string{"spec.stdio.sandbox.connect: required with network connect"}},
		{"ports without connect", "      network: loopback\n      connect: [\"80\"]\n", []string{"spec.stdio.sandbox.connect: applies to network connect only (network is loopback)"}},
		{"ports, network defaulted", "      connect: [\"80\"]\n", []string{"spec.stdio.sandbox.connect: applies to network connect only (network is none)"}},
		{"bad ports", "      network: connect\n      connect: [\"0\", \"http\", \":80\", \"h:70000\"]\n", []string{
			`spec.stdio.sandbox.connect[0]: "0": the port must be a number from 1 to 65535`,
			`spec.stdio.sandbox.connect[1]: "http": the port must be`,
			`spec.stdio.sandbox.connect[2]: ":80" has an empty host`,
			`spec.stdio.sandbox.connect[3]: "h:70000": the port must be`,
		}},
		{"dns without connect", "      network: all\n      dns: true\n", []string{"spec.stdio.sandbox.dns: applies to network connect only"}},
		{"bad limits", "      limits: {memory: 2GB, processes: 0, openFiles: 2}\n", []string{
			`spec.stdio.sandbox.limits.memory: "2GB" is not a size`,
			"spec.stdio.sandbox.limits.processes: must be at least 1, got 0",
			"spec.stdio.sandbox.limits.openFiles: must be at least 3",
		}},
		{"unknown field", "      readonly: [/x]\n", []string{"spec.stdio.sandbox.readonly: unknown field"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := DecodeFile("s.yaml", []byte(sandboxManifest(tc.policy)))
			if len(docs) != 1 {
				t.Fatalf("%d documents", len(docs))
			}
			var got []string
			for _, e := range docs[0].Errors {
				got = append(got, e.Field+": "+e.Msg)
				if e.File != "s.yaml" || e.Line < 8 {
					t.Errorf("problem %q at %s:%d, want the file and the field's line", e.Msg, e.File, e.Line)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d: %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("problem %d = %q, want it to start with %q", i, got[i], w)
				}
			}
		})
	}
}

func TestSandboxDeepCopyKeepsAnEmptyGrantList(t *testing.T) {
	n := 3
	p := &SandboxSpec{Grants: []string{}, Read: []string{"/a"}, Limits: &SandboxLimits{Processes: &n}}
	c := p.DeepCopy()
	if c.Grants == nil || len(c.Grants) != 0 || c.Granted(GrantCommand) {
		t.Errorf("copy of grants: [] = %#v, grants command %v; want empty, granting nothing", c.Grants, c.Granted(GrantCommand))
	}
	c.Read[0], *c.Limits.Processes = "/b", 4
	if p.Read[0] != "/a" || *p.Limits.Processes != 3 {
		t.Error("the copy shares memory with the original")
	}
	if !(&SandboxSpec{}).Granted(GrantTmp) {
		t.Error("an absent grants list must grant every name")
	}
}

// TestSandboxEmptyGrantsSurviveJSON: grants: [] (nothing) and no grants
// (everything) differ in the hashes, so a change reconnects, and through
// JSON, as the state directory keeps the last valid spec.
func TestSandboxEmptyGrantsSurviveJSON(t *testing.T) {
	none := DecodeFile("s.yaml", []byte(sandboxManifest("      grants: []\n")))[0].Conn
	all := DecodeFile("s.yaml", []byte(sandboxManifest("      {}\n")))[0].Conn
	if none == nil || all == nil {
		t.Fatal("the manifests do not decode")
	}
	if none.Spec.ConnectHash() == all.Spec.ConnectHash() {
		t.Error("grants: [] and no grants have the same ConnectHash")
	}
	b, err := json.Marshal(none)
	if err != nil {
		t.Fatal(err)
	}
	var back McpConnection
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Spec.Stdio.Sandbox.Granted(GrantCommand) {
		t.Errorf("grants: [] grants the command after a JSON round trip (%s)", b)
	}
}

func TestDecodeSandboxPolicy(t *testing.T) {
	p, err := DecodeSandboxPolicy("policy.yaml", []byte("network: loopback\nread: [/etc/ssl]\n"))
	if err != nil || p.NetworkMode() != NetworkLoopback || len(p.Read) != 1 {
		t.Fatalf("good policy: %+v, %v", p, err)
	}
	for _, tc := range []struct{ data, want string }{
		{"network: internet\n", `policy.yaml:1: network: "internet" is not one of`},
		{"\nreed: [/x]\n", "policy.yaml:2: reed: unknown field"},
		{"", "policy.yaml:1: empty"},
		{"[1, 2]\n", "policy.yaml:1: expected"},
	} {
		if _, err := DecodeSandboxPolicy("policy.yaml", []byte(tc.data)); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("DecodeSandboxPolicy(%q) = %v, want an error starting %q", tc.data, err, tc.want)
		}
	}
}
