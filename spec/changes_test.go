package spec

import (
	"slices"
	"strings"
	"testing"
)

// changeVariants are specs that differ from the first in one field each (or
// in how a default is written), for TestChangesAgreeWithHashes to compare
// every pair of.
var changeVariants = []string{
	"stdio: {command: srv, args: [a]}",
	"stdio: {command: srv, args: [a, b]}",
	"stdio: {command: other, args: [a]}",
	"stdio: {command: srv, args: [a], workingDir: /tmp}",
	"stdio: {command: srv, args: [a], env: [{name: TOKEN, value: hunter2-secret}]}",
	"stdio: {command: srv, args: [a], env: [{name: TOKEN, value: other-secret}]}",
	"stdio: {command: srv, args: [a], env: [{name: TOKEN, valueFrom: {file: t}}]}",
	"stdio: {command: srv, args: [a], env: [{name: A, value: x}, {name: B, value: y}]}",
	"stdio: {command: srv, args: [a], env: [{name: B, value: y}, {name: A, value: x}]}",
	"stdio: {command: srv, args: [a]}\ntoolPrefix: p",
	"stdio: {command: srv, args: [a]}\ntoolPrefix: \"\"",
	"stdio: {command: srv, args: [a]}\ntools: {allow: [x]}",
	"stdio: {command: srv, args: [a]}\ntools: {deny: [x]}",
	"stdio: {command: srv, args: [a]}\ntools: {}",
	"stdio: {command: srv, args: [a]}\nsuspend: true",
	"stdio: {command: srv, args: [a]}\nhealthCheck: {interval: 1m}",
	"stdio: {command: srv, args: [a]}\nhealthCheck: {interval: 30s}",
	"stdio: {command: srv, args: [a]}\nbackoff: {initial: 1s, max: 5s}",
	"stdio: {command: srv, args: [a]}\ncallTimeout: 5s",
	"stdio: {command: srv, args: [a]}\nlifecycle: {mode: OnDemand}",
	"stdio: {command: srv, args: [a]}\nlifecycle: {mode: Always}",
	"http: {url: http://127.0.0.1:1/mcp}",
	"http: {url: http://127.0.0.1:1/mcp, transport: streamable}",
	"http: {url: http://127.0.0.1:1/mcp, transport: sse}",
	"http: {url: http://127.0.0.1:2/mcp}",
	"http: {url: http://127.0.0.1:1/mcp, headers: [{name: Authorization, value: Bearer sekrit-token}]}",
	"http: {url: http://127.0.0.1:1/mcp, headers: [{name: Authorization, value: Bearer other-token}]}",
	"http: {url: http://127.0.0.1:1/mcp}\ntoolPrefix: p",
	// 28 onwards: containers.
	"container: {image: srv:1}",
	"container: {image: srv:1, network: none, memory: 512Mi, pids: 256}",
	"container: {image: srv:1, memory: 524288Ki}",
	"container: {image: srv:2}",
	"container: {image: srv:1, memory: 1Gi}",
	"container: {image: srv:1, env: [{name: TOKEN, value: hunter2-secret}]}",
	"container: {image: srv:1, env: [{name: TOKEN, value: other-secret}]}",
	"container: {image: srv:1, secretFiles: [{name: token, value: hunter2-secret}]}",
	"container: {image: srv:1, mounts: [{source: /a, target: /a}]}",
	"container: {image: srv:1, mounts: [{source: /a, target: /a, writable: true}]}",
	"container: {image: srv:1, network: bridge, port: 8080}",
	"container: {image: srv:1, network: bridge, port: 8080, path: /mcp}",
	"container: {image: srv:1}\ncallTimeout: 5s",
}

func variantSpec(t *testing.T, body string) *Spec {
	t.Helper()
	docs := DecodeFile("m.yaml", []byte(withSpec(body)))
	if len(docs) != 1 || docs[0].Conn == nil {
		t.Fatalf("%s: %v", body, docs[0].Errors)
	}
	return &docs[0].Conn.Spec
}

// TestChangesAgreeWithHashes: tether diff's reconnect/in-place split must
// be the reconciler's. Over every pair of variants, connect is empty
// exactly when ConnectHash (what the supervisor keeps a session for) is
// equal, and both lists are empty exactly when Hash is.
func TestChangesAgreeWithHashes(t *testing.T) {
	specs := make([]*Spec, len(changeVariants))
	for i, v := range changeVariants {
		specs[i] = variantSpec(t, v)
	}
	for i, a := range specs {
		for j, b := range specs {
			connect, inPlace := Changes(a, b)
			if got, want := len(connect) > 0, a.ConnectHash() != b.ConnectHash(); got != want {
				t.Errorf("%q → %q: connect changes %v, ConnectHash differs %v", changeVariants[i], changeVariants[j], connect, want)
			}
			if got, want := len(connect)+len(inPlace) > 0, a.Hash() != b.Hash(); got != want {
				t.Errorf("%q → %q: changes %v %v, Hash differs %v", changeVariants[i], changeVariants[j], connect, inPlace, want)
			}
			for _, p := range append(slices.Clone(connect), inPlace...) {
				for _, secret := range []string{"hunter2", "other-secret", "sekrit", "other-token"} {
					if strings.Contains(p, secret) {
						t.Errorf("%q → %q: path %q shows a value", changeVariants[i], changeVariants[j], p)
					}
				}
			}
		}
	}
}

func TestChangesNamesFields(t *testing.T) {
	tests := []struct {
		old, new         string
		connect, inPlace []string
	}{
		{changeVariants[0], changeVariants[1], []string{"spec.stdio.args"}, nil},
		{changeVariants[0], changeVariants[4], []string{"spec.stdio.env"}, nil},
		{changeVariants[4], changeVariants[5], []string{"spec.stdio.env[TOKEN]"}, nil},
		{changeVariants[7], changeVariants[8], []string{"spec.stdio.env"}, nil},
		{changeVariants[0], changeVariants[9], nil, []string{"spec.toolPrefix"}},
		{changeVariants[0], changeVariants[11], nil, []string{"spec.tools"}},
		{changeVariants[11], changeVariants[12], nil, []string{"spec.tools.allow", "spec.tools.deny"}},
		{changeVariants[0], changeVariants[13], nil, nil}, // tools: {} filters nothing
		{changeVariants[0], changeVariants[15], nil, []string{"spec.healthCheck.interval"}},
		{changeVariants[0], changeVariants[16], nil, nil}, // the default written out
		{changeVariants[0], changeVariants[20], nil, nil},
		{changeVariants[21], changeVariants[22], nil, nil},
		{changeVariants[21], changeVariants[23], []string{"spec.http.transport"}, nil},
		{changeVariants[25], changeVariants[26], []string{"spec.http.headers[Authorization]"}, nil},
		{changeVariants[0], changeVariants[21], []string{"spec.http", "spec.stdio"}, nil},
		{changeVariants[0], changeVariants[18], nil, []string{"spec.callTimeout"}},
		{changeVariants[0], changeVariants[14], nil, []string{"spec.suspend"}},
		{changeVariants[28], changeVariants[29], nil, nil}, // the defaults written out
		{changeVariants[28], changeVariants[30], nil, nil}, // 512Mi spelt in Ki
		{changeVariants[28], changeVariants[31], []string{"spec.container.image"}, nil},
		{changeVariants[28], changeVariants[32], []string{"spec.container.memory"}, nil},
		{changeVariants[33], changeVariants[34], []string{"spec.container.env[TOKEN]"}, nil},
		{changeVariants[28], changeVariants[35], []string{"spec.container.secretFiles"}, nil},
		{changeVariants[36], changeVariants[37], []string{"spec.container.mounts"}, nil},
		{changeVariants[38], changeVariants[39], nil, nil}, // the default path written out
		{changeVariants[28], changeVariants[40], nil, []string{"spec.callTimeout"}},
		{changeVariants[0], changeVariants[28], []string{"spec.container", "spec.stdio"}, nil},
	}
	for _, tt := range tests {
		connect, inPlace := Changes(variantSpec(t, tt.old), variantSpec(t, tt.new))
		if !slices.Equal(connect, tt.connect) || !slices.Equal(inPlace, tt.inPlace) {
			t.Errorf("%q → %q: got %v / %v, want %v / %v", tt.old, tt.new, connect, inPlace, tt.connect, tt.inPlace)
		}
	}
}
