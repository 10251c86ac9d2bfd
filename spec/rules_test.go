package spec

import (
	"strings"
	"testing"
)

// header is the start of every rule case: spec: is on line 5, and the case's
// spec body starts on line 6.
const header = `apiVersion: tether.dev/v1alpha1
kind: McpConnection
metadata:
  name: demo
spec:
`

// withSpec builds a one-document manifest whose spec body is body,
// indented under spec:.
func withSpec(body string) string {
	var b strings.Builder
	b.WriteString(header)
	for _, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// ruleCase is one manifest and the problems DecodeFile finds in it.
type ruleCase struct {
	name string
	in   string
	want []string // Error() of each problem, in order
}

const minimalStdio = "stdio: {command: srv}\n"

// ruleCases break every validation rule of docs/contract.md §1, one case per way of
// breaking it. TestRules holds DecodeFile to them and TestSchemaRuleCases
// the schema.
var ruleCases = []ruleCase{
	{name: "minimal stdio is valid", in: withSpec(minimalStdio)},
	{name: "minimal http is valid", in: withSpec("http: {url: https://example.com/mcp}")},
	{name: "every field is valid", in: withSpec(`stdio:
  command: ./bin/server
  args: ["-v", "--port=3"]
  workingDir: /srv
  env:
    - {name: A, value: "1"}
    - {name: B, valueFrom: {file: /run/secrets/b}}
    - {name: C, valueFrom: {env: HOME}}
    - {name: D, valueFrom: {secretKeyRef: {name: github.token, key: .token_1}}}
suspend: true
toolPrefix: ""
tools: {allow: ["get_*", "search?"], deny: ["[a-c]*"]}
healthCheck: {interval: 1m30s, timeout: 500ms, failureThreshold: 1}
backoff: {initial: 1s, max: 1s}
callTimeout: 2h`)},

	// apiVersion and kind
	{name: "apiVersion missing", in: strings.Replace(withSpec(minimalStdio), "apiVersion: tether.dev/v1alpha1\n", "", 1),
		want: []string{`m.yaml:1: document 1 (line 1): apiVersion: required (want "tether.dev/v1alpha1")`}},
	{name: "apiVersion wrong", in: strings.Replace(withSpec(minimalStdio), "v1alpha1", "v1", 1),
		want: []string{`m.yaml:1: document 1 (line 1): apiVersion: unsupported apiVersion (want "tether.dev/v1alpha1")`}},
	{name: "kind wrong", in: strings.Replace(withSpec(minimalStdio), "kind: McpConnection", "kind: ConfigMap", 1),
		want: []string{`m.yaml:2: document 1 (line 1): kind: unsupported kind (want "McpConnection")`}},
	{name: "kind in the wrong case", in: strings.Replace(withSpec(minimalStdio), "kind: McpConnection", "kind: mcpconnection", 1),
		want: []string{`m.yaml:2: document 1 (line 1): kind: unsupported kind (want "McpConnection")`}},

	// metadata
	{name: "name missing", in: strings.Replace(withSpec(minimalStdio), "  name: demo\n", "  labels: {}\n", 1),
		want: []string{`m.yaml:3: document 1 (line 1): metadata.name: required`}},
	{name: "name with upper case", in: strings.Replace(withSpec(minimalStdio), "name: demo", "name: Demo", 1),
		want: []string{`m.yaml:4: document 1 (line 1): metadata.name: invalid name: must be a DNS-1123 label (at most 63 characters: lowercase letters, digits and '-', starting and ending with a letter or digit)`}},
	{name: "name with underscore", in: strings.Replace(withSpec(minimalStdio), "name: demo", "name: my_server", 1),
		want: []string{`m.yaml:4: document 1 (line 1): metadata.name: invalid name: must be a DNS-1123 label (at most 63 characters: lowercase letters, digits and '-', starting and ending with a letter or digit)`}},
	{name: "name ending in a dash", in: strings.Replace(withSpec(minimalStdio), "name: demo", "name: demo-", 1),
		want: []string{`m.yaml:4: document 1 (line 1): metadata.name: invalid name: must be a DNS-1123 label (at most 63 characters: lowercase letters, digits and '-', starting and ending with a letter or digit)`}},
	{name: "name of 63 characters is valid", in: strings.Replace(withSpec(minimalStdio), "name: demo", "name: "+strings.Repeat("a", 63), 1)},
	{name: "name of 64 characters", in: strings.Replace(withSpec(minimalStdio), "name: demo", "name: "+strings.Repeat("a", 64), 1),
		want: []string{`m.yaml:4: document 1 (line 1): metadata.name: invalid name: must be a DNS-1123 label (at most 63 characters: lowercase letters, digits and '-', starting and ending with a letter or digit)`}},
	{name: "labels valid", in: strings.Replace(withSpec(minimalStdio), "  name: demo\n", "  name: demo\n  labels: {team: infra, app.kubernetes.io/name: gh, empty: \"\"}\n", 1)},
	{name: "label key and value invalid", in: strings.Replace(withSpec(minimalStdio), "  name: demo\n", "  name: demo\n  labels:\n    Bad/x: \"-v\"\n    team: 1\n", 1),
		want: []string{
			`m.yaml:6: document 1 (line 1): metadata.labels["Bad/x"]: invalid label key: the prefix before '/' must be a DNS subdomain (lowercase letters, digits, '-' and '.')`,
			`m.yaml:6: document 1 (line 1): metadata.labels["Bad/x"]: invalid label value: must be at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit`,
			`m.yaml:7: document 1 (line 1): metadata.labels.team: expected a string, got an integer (quote the value to make it a string)`,
		}},

	// transports
	{name: "no transport", in: withSpec("suspend: false"),
		want: []string{`m.yaml:5: document 1 (line 1): spec: exactly one of stdio, http or container is required`}},
	{name: "no spec at all", in: strings.Replace(withSpec(minimalStdio), "spec:\n  stdio: {command: srv}\n", "", 1),
		want: []string{`m.yaml:1: document 1 (line 1): spec: exactly one of stdio, http or container is required`}},
	{name: "two transports", in: withSpec("stdio: {command: srv}\nhttp: {url: http://127.0.0.1:1/mcp}"),
		want: []string{`m.yaml:5: document 1 (line 1): spec: stdio and http are mutually exclusive: set exactly one`}},
	{name: "minimal container is valid", in: withSpec("container: {image: example/server:1}")},
	{name: "every container field is valid", in: withSpec(`container:
  image: registry.example.com/team/server@sha256:0123
  command: [/server, -v]
  args: [--http, ":8080"]
  env:
    - {name: A, value: "1"}
    - {name: B, valueFrom: {file: /run/secrets/b}}
  secretFiles:
    - {name: github-token, valueFrom: {file: token}}
  network: mcp_net
  port: 8080
  path: /v1/mcp
  mounts:
    - {source: ./data, target: /data}
    - {source: /var/cache/x, target: /cache, writable: true}
  memory: 1Gi
  pids: 64
  user: "65532:65532"`)},
	{name: "container limits at their edges are valid", in: withSpec("container: {image: x, pids: 1, memory: 6Mi, user: " + strings.Repeat("u", 253) + "}")},
	{name: "container secret file name of 255 bytes is valid", in: withSpec("container: {image: x, secretFiles: [{name: " + strings.Repeat("n", 255) + ", value: v}]}")},
	{name: "container secret file name too long", in: withSpec("container: {image: x, secretFiles: [{name: " + strings.Repeat("n", 256) + ", value: v}]}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.secretFiles[0].name: invalid file name "` + strings.Repeat("n", 64) + `"...: letters, digits, '.', '_' and '-' (it is the file /run/secrets/<name> in the container)`}},
	{name: "container user too long", in: withSpec("container: {image: x, user: " + strings.Repeat("u", 254) + "}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.user: invalid user "` + strings.Repeat("u", 64) + `"...: a name or uid, optionally :group or :gid`}},
	{name: "container and stdio", in: withSpec("stdio: {command: srv}\ncontainer: {image: x}"),
		want: []string{`m.yaml:5: document 1 (line 1): spec: stdio and container are mutually exclusive: set exactly one`}},
	{name: "container without image", in: withSpec("container: {args: [x]}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.image: required`}},
	{name: "container image that would pass for an option", in: withSpec("container: {image: --privileged}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.image: invalid image reference "--privileged": letters, digits and '.', '_', '/', ':', '@', '+', '-', starting with a letter or digit (at most 512 characters)`}},
	{name: "container command empty", in: withSpec("container: {image: x, command: []}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.command: empty: leave it out to run the image's entrypoint`}},
	{name: "container command's program empty", in: withSpec(`container: {image: x, command: [""]}`),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.command[0]: the program to run is empty`}},
	{name: "container network host", in: withSpec("container: {image: x, network: host}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.network: host is refused: it would give the server the host's network, loopback services included (use bridge or a network of your own)`}},
	{name: "container network of another container", in: withSpec("container: {image: x, network: \"container:db\"}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.network: invalid network "container:db": none, bridge or a network's name (letters, digits, '_', '.' and '-', starting with a letter or digit)`}},
	{name: "container port without a network", in: withSpec("container: {image: x, port: 8080}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.port: needs a network: with network none nothing can reach the port (set network: bridge or a network's name)`}},
	{name: "container port out of range", in: withSpec("container: {image: x, network: bridge, port: 70000}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.port: must be a port from 1 to 65535, got 70000`}},
	{name: "container path without port", in: withSpec("container: {image: x, path: /mcp}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.path: applies only with port (a server on stdin and stdout has no path)`}},
	{name: "container path not absolute", in: withSpec("container: {image: x, network: bridge, port: 80, path: mcp}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.path: must be an absolute URL path such as /mcp (no query, fragment or spaces)`}},
	{name: "container mount problems", in: withSpec(`container:
  image: x
  secretFiles: [{name: t, value: v}]
  mounts:
    - {source: "", target: /a}
    - {source: /a, target: rel}
    - {source: /a, target: /}
    - {source: /a, target: /.tether/x}
    - {source: /a, target: /run/secrets}
    - {source: /a, target: /b}
    - {source: /c, target: /b/}`),
		want: []string{
			`m.yaml:10: document 1 (line 1): spec.container.mounts[0].source: required`,
			`m.yaml:11: document 1 (line 1): spec.container.mounts[1].target: must be an absolute path in the container`,
			`m.yaml:12: document 1 (line 1): spec.container.mounts[2].target: must not be the container's root`,
			`m.yaml:13: document 1 (line 1): spec.container.mounts[3].target: /.tether is tether's (it starts the server with its env from there)`,
			`m.yaml:14: document 1 (line 1): spec.container.mounts[4].target: /run/secrets holds the secretFiles`,
			`m.yaml:16: document 1 (line 1): spec.container.mounts[6].target: duplicate target "/b" (also spec.container.mounts[5])`,
		}},
	{name: "container memory", in: withSpec("container: {image: x, memory: 512M}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.memory: "512M" is not a size: a positive number of bytes, or with Ki, Mi or Gi (2Gi)`}},
	{name: "container memory too small", in: withSpec("container: {image: x, memory: 1Mi}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.memory: "1Mi" is less than the least a container runtime takes (6Mi)`}},
	{name: "container memory too large", in: withSpec("container: {image: x, memory: 99999999999Gi}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.memory: "99999999999Gi" is not a size: a positive number of bytes, or with Ki, Mi or Gi (2Gi)`}},
	{name: "container pids", in: withSpec("container: {image: x, pids: 0}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.pids: must be at least 1, got 0`}},
	{name: "container user", in: withSpec("container: {image: x, user: \"-1\"}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.user: invalid user "-1": a name or uid, optionally :group or :gid`}},
	{name: "container secret file names", in: withSpec(`container:
  image: x
  secretFiles:
    - {name: "../etc/passwd", value: v}
    - {name: a, value: v}
    - {name: a, value: w}`),
		want: []string{
			`m.yaml:9: document 1 (line 1): spec.container.secretFiles[0].name: invalid file name "../etc/passwd": letters, digits, '.', '_' and '-' (it is the file /run/secrets/<name> in the container)`,
			`m.yaml:11: document 1 (line 1): spec.container.secretFiles[2].name: duplicate name "a" (also spec.container.secretFiles[1])`,
		}},
	{name: "container env value never quoted", in: withSpec("container: {image: x, env: [{name: A, value: \"s3cr\\0t\"}]}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.container.env[0].value: must not contain a NUL character`}},
	{name: "stdio without command", in: withSpec("stdio: {args: [x]}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.stdio.command: required`}},
	{name: "stdio command empty", in: withSpec(`stdio: {command: ""}`),
		want: []string{`m.yaml:6: document 1 (line 1): spec.stdio.command: required`}},
	{name: "relative command is not checked here", in: withSpec("stdio: {command: not-on-path-anywhere}")},
	{name: "command with NUL", in: withSpec(`stdio: {command: "a\0b"}`),
		want: []string{`m.yaml:6: document 1 (line 1): spec.stdio.command: must not contain a NUL character`}},
	{name: "http without url", in: withSpec("http: {transport: sse}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.http.url: required`}},
	{name: "url with another scheme", in: withSpec("http: {url: ftp://example.com/mcp}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.http.url: unsupported scheme "ftp" (want http or https)`}},
	{name: "url without scheme", in: withSpec("http: {url: example.com/mcp}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.http.url: invalid URL: no scheme (want http:// or https://)`}},
	{name: "url without host", in: withSpec("http: {url: \"http:///mcp\"}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.http.url: invalid URL: no host`}},
	{name: "url that does not parse, not echoed", in: withSpec("http: {url: \"http://[::1:80/mcp?token=hunter2\"}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.http.url: invalid URL: missing ']' in host`}},
	{name: "url port over 65535", in: withSpec("http: {url: \"http://127.0.0.1:99999/mcp\"}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.http.url: invalid URL: the port must be a number from 1 to 65535`}},
	{name: "url port 0", in: withSpec("http: {url: \"http://example.com:0/mcp\"}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.http.url: invalid URL: the port must be a number from 1 to 65535`}},
	{name: "url port too long to be a number, not echoed", in: withSpec("http: {url: \"https://example.com:99999999999999999999/mcp?token=hunter2\"}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.http.url: invalid URL: the port must be a number from 1 to 65535`}},
	{name: "url port without host", in: withSpec("http: {url: \"http://:8080/mcp\"}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.http.url: invalid URL: no host name before the port`}},
	{name: "url port 65535 is valid", in: withSpec("http: {url: \"http://127.0.0.1:65535/mcp\"}")},
	{name: "alias to an unknown anchor, not echoed", in: "*hunter2\n",
		want: []string{`m.yaml:1: document 1 (line 1): invalid YAML: unknown anchor referenced`}},
	{name: "http transport sse is valid", in: withSpec("http: {url: http://127.0.0.1:1/sse, transport: sse}")},
	{name: "http transport unknown", in: withSpec("http: {url: http://127.0.0.1:1/mcp, transport: websocket}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.http.transport: unsupported transport "websocket" (want "streamable" or "sse")`}},

	// oauth
	{name: "oauth client credentials is valid", in: withSpec(`http:
  url: https://example.com/mcp
  oauth:
    clientCredentials:
      clientID: tether
      clientSecret: {valueFrom: {file: secrets/oauth-client}}
      scopes: [tools.read, "mcp:write"]`)},
	{name: "oauth authorization code is valid bare", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth: {authorizationCode: {}}")},
	{name: "oauth authorization code with every field is valid", in: withSpec(`http:
  url: https://example.com/mcp
  headers: [{name: X-Api-Version, value: "2"}]
  oauth:
    authorizationCode:
      clientID: registered-app
      clientSecret: {value: s3cr3t}
      scopes: [openid, offline_access]`)},
	{name: "oauth authorization code with a metadata document is valid", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth:\n    authorizationCode: {clientID: \"https://example.com/tether.json\"}")},
	{name: "oauth with no flow", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth: {}"),
		want: []string{`m.yaml:8: document 1 (line 1): spec.http.oauth: exactly one of clientCredentials or authorizationCode is required`}},
	{name: "oauth with both flows", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth:\n    authorizationCode: {}\n    clientCredentials: {clientID: a, clientSecret: {value: b}}"),
		want: []string{`m.yaml:8: document 1 (line 1): spec.http.oauth: clientCredentials and authorizationCode are mutually exclusive: set exactly one`}},
	{name: "oauth on stdio", in: withSpec("stdio: {command: srv}\noauth: {authorizationCode: {}}"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.oauth: unknown field`}},
	{name: "oauth unknown flow", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth: {deviceCode: {}}"),
		want: []string{
			`m.yaml:8: document 1 (line 1): spec.http.oauth.deviceCode: unknown field`,
			`m.yaml:8: document 1 (line 1): spec.http.oauth: exactly one of clientCredentials or authorizationCode is required`,
		}},
	{name: "oauth beside an Authorization header", in: withSpec("http:\n  url: https://example.com/mcp\n  headers: [{name: authorization, valueFrom: {file: /t}}]\n  oauth: {authorizationCode: {}}"),
		want: []string{`m.yaml:8: document 1 (line 1): spec.http.headers[0].name: an Authorization header and spec.http.oauth exclude each other: with oauth, tether sends the access token as the Authorization header`}},
	{name: "oauth client credentials without client", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth:\n    clientCredentials: {scopes: [a]}"),
		want: []string{
			`m.yaml:9: document 1 (line 1): spec.http.oauth.clientCredentials.clientID: required`,
			`m.yaml:9: document 1 (line 1): spec.http.oauth.clientCredentials.clientSecret: required (the client credentials grant needs a confidential client)`,
		}},
	{name: "oauth client secret with both sources, not echoed", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth:\n    clientCredentials:\n      clientID: a\n      clientSecret: {value: hunter2, valueFrom: {env: S}}"),
		want: []string{`m.yaml:11: document 1 (line 1): spec.http.oauth.clientCredentials.clientSecret: value and valueFrom are mutually exclusive: set exactly one`}},
	{name: "oauth client secret valueFrom empty", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth:\n    clientCredentials:\n      clientID: a\n      clientSecret: {valueFrom: {}}"),
		want: []string{`m.yaml:11: document 1 (line 1): spec.http.oauth.clientCredentials.clientSecret.valueFrom: exactly one of file, env or secretKeyRef is required`}},
	{name: "oauth client secret with a line break, not echoed", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth:\n    clientCredentials:\n      clientID: a\n      clientSecret: {value: \"hunter2\\nx\"}"),
		want: []string{`m.yaml:11: document 1 (line 1): spec.http.oauth.clientCredentials.clientSecret.value: must not contain CR, LF or NUL`}},
	{name: "oauth client credentials with a metadata document", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth:\n    clientCredentials: {clientID: \"https://example.com/c.json\", clientSecret: {value: b}}"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.http.oauth.clientCredentials.clientID: a client ID that is a URL names a client ID metadata document, which is for authorizationCode; clientCredentials needs a client ID registered with the authorization server`}},
	{name: "oauth metadata document port out of range", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth:\n    authorizationCode: {clientID: \"https://example.com:70000/tether.json\"}"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.http.oauth.authorizationCode.clientID: a client ID that is a URL names a client ID metadata document: invalid URL: the port must be a number from 1 to 65535`}},
	{name: "oauth metadata document at the root", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth:\n    authorizationCode: {clientID: \"https://example.com/\"}"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.http.oauth.authorizationCode.clientID: a client ID that is a URL names a client ID metadata document: it must be an https:// URL with a path, such as https://example.com/tether.json`}},
	{name: "oauth metadata document over http", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth:\n    authorizationCode: {clientID: \"http://example.com/c.json\"}"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.http.oauth.authorizationCode.clientID: a client ID that is a URL names a client ID metadata document, which must be served over https://`}},
	{name: "oauth secret without client ID", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth:\n    authorizationCode: {clientSecret: {value: b}}"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.http.oauth.authorizationCode.clientSecret: needs clientID: a secret belongs to a client registered beforehand`}},
	{name: "oauth secret of a metadata document", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth:\n    authorizationCode: {clientID: \"https://example.com/c.json\", clientSecret: {value: b}}"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.http.oauth.authorizationCode.clientSecret: a client ID metadata document (a clientID that is a URL) is a public client: it has no secret`}},
	{name: "oauth scopes invalid", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth:\n    authorizationCode:\n      scopes: [\"read write\", \"\", a, a]"),
		want: []string{
			`m.yaml:10: document 1 (line 1): spec.http.oauth.authorizationCode.scopes[0]: invalid scope "read write": a scope is printable ASCII without spaces, '"' or '\' (list several scopes as several items)`,
			`m.yaml:10: document 1 (line 1): spec.http.oauth.authorizationCode.scopes[1]: empty scope`,
			`m.yaml:10: document 1 (line 1): spec.http.oauth.authorizationCode.scopes[3]: duplicate scope "a" (also spec.http.oauth.authorizationCode.scopes[2])`,
		}},
	{name: "oauth scopes not a list", in: withSpec("http:\n  url: https://example.com/mcp\n  oauth:\n    clientCredentials: {clientID: a, clientSecret: {value: b}, scopes: \"a b\"}"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.http.oauth.clientCredentials.scopes: expected a list, got a string`}},

	// durations and thresholds
	{name: "duration that does not parse", in: withSpec(minimalStdio + "healthCheck: {interval: 3x}"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.healthCheck.interval: invalid duration "3x": unknown unit "x" in duration`}},
	{name: "duration without unit", in: withSpec(minimalStdio + "healthCheck:\n  timeout: 30"),
		want: []string{`m.yaml:8: document 1 (line 1): spec.healthCheck.timeout: invalid duration "30": missing unit in duration`}},
	{name: "lifecycle OnDemand is valid", in: withSpec(minimalStdio + "lifecycle: {mode: OnDemand, idleTimeout: 90s}")},
	{name: "lifecycle mode unknown", in: withSpec(minimalStdio + "lifecycle: {mode: Sometimes}"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.lifecycle.mode: "Sometimes" is not Always or OnDemand`}},
	{name: "lifecycle idleTimeout without OnDemand", in: withSpec(minimalStdio + "lifecycle: {idleTimeout: 5m}"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.lifecycle.idleTimeout: applies to mode OnDemand only`}},
	{name: "lifecycle idleTimeout zero", in: withSpec(minimalStdio + "lifecycle: {mode: OnDemand, idleTimeout: 0s}"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.lifecycle.idleTimeout: must be positive, got 0s`}},
	{name: "duration zero", in: withSpec(minimalStdio + "callTimeout: 0s"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.callTimeout: must be positive, got 0s`}},
	{name: "duration negative", in: withSpec(minimalStdio + "backoff: {initial: -1s}"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.backoff.initial: must be positive, got -1s`}},
	{name: "duration not a scalar", in: withSpec(minimalStdio + "callTimeout: [1s]"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.callTimeout: expected a duration such as "30s", got a list`}},
	{name: "failureThreshold zero", in: withSpec(minimalStdio + "healthCheck: {failureThreshold: 0}"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.healthCheck.failureThreshold: must be at least 1, got 0`}},
	{name: "failureThreshold negative", in: withSpec(minimalStdio + "healthCheck: {failureThreshold: -2}"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.healthCheck.failureThreshold: must be at least 1, got -2`}},
	{name: "failureThreshold quoted", in: withSpec(minimalStdio + "healthCheck: {failureThreshold: \"3\"}"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.healthCheck.failureThreshold: expected an integer, got a string`}},
	{name: "failureThreshold fraction", in: withSpec(minimalStdio + "healthCheck: {failureThreshold: 1.5}"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.healthCheck.failureThreshold: expected an integer, got a number`}},
	{name: "failureThreshold too big", in: withSpec(minimalStdio + "healthCheck: {failureThreshold: 99999999999999999999}"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.healthCheck.failureThreshold: expected an integer, got a number`}},
	{name: "backoff max below initial", in: withSpec(minimalStdio + "backoff: {initial: 2s, max: 1s}"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.backoff.max: 1s is less than backoff.initial (2s)`}},
	{name: "backoff initial above the default max", in: withSpec(minimalStdio + "backoff:\n  initial: 5s"),
		want: []string{`m.yaml:8: document 1 (line 1): spec.backoff.initial: 5s is more than the default backoff.max (3s): set max too`}},

	// env and headers
	{name: "env entry with neither value nor valueFrom", in: withSpec("stdio:\n  command: srv\n  env:\n    - name: A"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.stdio.env[0]: exactly one of value or valueFrom is required`}},
	{name: "env entry with both", in: withSpec("stdio:\n  command: srv\n  env:\n    - {name: A, value: x, valueFrom: {env: B}}"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.stdio.env[0]: value and valueFrom are mutually exclusive: set exactly one`}},
	{name: "env entry with an empty value is valid", in: withSpec("stdio:\n  command: srv\n  env:\n    - {name: A, value: \"\"}")},
	{name: "valueFrom with neither", in: withSpec("stdio:\n  command: srv\n  env:\n    - name: A\n      valueFrom: {}"),
		want: []string{`m.yaml:10: document 1 (line 1): spec.stdio.env[0].valueFrom: exactly one of file, env or secretKeyRef is required`}},
	{name: "valueFrom with both", in: withSpec("stdio:\n  command: srv\n  env:\n    - name: A\n      valueFrom: {file: /f, env: B}"),
		want: []string{`m.yaml:10: document 1 (line 1): spec.stdio.env[0].valueFrom: file and env are mutually exclusive: set exactly one`}},
	{name: "valueFrom with all three", in: withSpec("stdio:\n  command: srv\n  env:\n    - name: A\n      valueFrom: {file: /f, env: B, secretKeyRef: {name: s, key: k}}"),
		want: []string{`m.yaml:10: document 1 (line 1): spec.stdio.env[0].valueFrom: file and env and secretKeyRef are mutually exclusive: set exactly one`}},
	{name: "secretKeyRef beside env", in: withSpec("http:\n  url: http://h/mcp\n  headers:\n    - name: Authorization\n      valueFrom: {env: B, secretKeyRef: {name: s, key: k}}"),
		want: []string{`m.yaml:10: document 1 (line 1): spec.http.headers[0].valueFrom: env and secretKeyRef are mutually exclusive: set exactly one`}},
	{name: "secretKeyRef without name or key", in: withSpec("http:\n  url: http://h/mcp\n  headers:\n    - name: Authorization\n      valueFrom: {secretKeyRef: {}}"),
		want: []string{
			`m.yaml:10: document 1 (line 1): spec.http.headers[0].valueFrom.secretKeyRef.name: required`,
			`m.yaml:10: document 1 (line 1): spec.http.headers[0].valueFrom.secretKeyRef.key: required`,
		}},
	{name: "secretKeyRef name not a DNS subdomain", in: withSpec("stdio:\n  command: srv\n  env:\n    - name: A\n      valueFrom:\n        secretKeyRef: {name: My_Secret, key: \"a/b\"}"),
		want: []string{
			`m.yaml:11: document 1 (line 1): spec.stdio.env[0].valueFrom.secretKeyRef.name: invalid Secret name "My_Secret": must be a DNS-1123 subdomain (at most 253 characters: lowercase letters, digits, '-' and '.')`,
			`m.yaml:11: document 1 (line 1): spec.stdio.env[0].valueFrom.secretKeyRef.key: invalid Secret key "a/b": must be at most 253 characters of letters, digits, '-', '_' and '.'`,
		}},
	{name: "secretKeyRef unknown field", in: withSpec("stdio:\n  command: srv\n  env:\n    - name: A\n      valueFrom:\n        secretKeyRef: {name: s, key: k, optional: true}"),
		want: []string{`m.yaml:11: document 1 (line 1): spec.stdio.env[0].valueFrom.secretKeyRef.optional: unknown field`}},
	{name: "valueFrom env name with =", in: withSpec("stdio:\n  command: srv\n  env:\n    - name: A\n      valueFrom: {env: \"B=C\"}"),
		want: []string{`m.yaml:10: document 1 (line 1): spec.stdio.env[0].valueFrom.env: invalid environment variable name "B=C": must not contain '=' or NUL`}},
	{name: "env name missing", in: withSpec("stdio:\n  command: srv\n  env:\n    - value: x"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.stdio.env[0].name: required`}},
	{name: "env name with =", in: withSpec("stdio:\n  command: srv\n  env:\n    - {name: \"A=B\", value: x}"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.stdio.env[0].name: invalid environment variable name "A=B": must not contain '=' or NUL`}},
	{name: "env name twice", in: withSpec("stdio:\n  command: srv\n  env:\n    - {name: A, value: x}\n    - {name: A, value: y}"),
		want: []string{`m.yaml:10: document 1 (line 1): spec.stdio.env[1].name: duplicate name "A" (also spec.stdio.env[0])`}},
	{name: "env not a list", in: withSpec("stdio:\n  command: srv\n  env: {A: x}"),
		want: []string{`m.yaml:8: document 1 (line 1): spec.stdio.env: expected a list, got a mapping`}},
	{name: "header name not a token", in: withSpec("http:\n  url: http://h/mcp\n  headers:\n    - {name: \"X Token\", valueFrom: {file: /t}}"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.http.headers[0].name: invalid header name "X Token": must be an HTTP token (letters, digits and !#$%&'*+-.^_` + "`" + `|~)`}},
	{name: "header names are case-insensitive", in: withSpec("http:\n  url: http://h/mcp\n  headers:\n    - {name: Authorization, value: a}\n    - {name: authorization, value: b}"),
		want: []string{`m.yaml:10: document 1 (line 1): spec.http.headers[1].name: duplicate name "authorization" (also spec.http.headers[0])`}},
	{name: "header value with a line break, not echoed", in: withSpec("http:\n  url: http://h/mcp\n  headers:\n    - {name: X-A, value: \"Bearer s3cr3t\\r\\nX-B: 1\"}"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.http.headers[0].value: must not contain CR, LF or NUL`}},
	{name: "header with neither", in: withSpec("http:\n  url: http://h/mcp\n  headers:\n    - {name: X-A}"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.http.headers[0]: exactly one of value or valueFrom is required`}},

	// tools and prefix
	{name: "glob that does not compile", in: withSpec(minimalStdio + "tools:\n  allow: [\"get_*\", \"[a-\"]"),
		want: []string{`m.yaml:8: document 1 (line 1): spec.tools.allow[1]: invalid glob "[a-": syntax error in pattern`}},
	{name: "glob bad after a literal prefix", in: withSpec(minimalStdio + "tools:\n  deny: [\"zz\\\\\"]"),
		want: []string{`m.yaml:8: document 1 (line 1): spec.tools.deny[0]: invalid glob "zz\\": syntax error in pattern`}},
	{name: "glob empty", in: withSpec(minimalStdio + "tools: {deny: [\"\"]}"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.tools.deny[0]: empty pattern`}},
	{name: "toolPrefix explicitly empty is valid", in: withSpec(minimalStdio + `toolPrefix: ""`)},
	{name: "toolPrefix with a space", in: withSpec(minimalStdio + `toolPrefix: "my tools"`),
		want: []string{`m.yaml:7: document 1 (line 1): spec.toolPrefix: invalid prefix "my tools": must be at most 64 characters of letters, digits, '_', '-' and '.' (tool names are <prefix>_<tool>)`}},

	// strict decoding
	{name: "unknown field", in: withSpec(minimalStdio + "retries: 3"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.retries: unknown field`}},
	{name: "field in the wrong case", in: withSpec("stdio:\n  Command: srv"),
		want: []string{
			`m.yaml:6: document 1 (line 1): spec.stdio.command: required`,
			`m.yaml:7: document 1 (line 1): spec.stdio.Command: unknown field (did you mean "command"? field names are case-sensitive)`,
		}},
	{name: "top-level field in the wrong case", in: strings.Replace(withSpec(minimalStdio), "kind:", "Kind:", 1),
		want: []string{
			`m.yaml:1: document 1 (line 1): kind: required (want "McpConnection")`,
			`m.yaml:2: document 1 (line 1): Kind: unknown field (did you mean "kind"? field names are case-sensitive)`,
		}},
	{name: "duplicate key", in: withSpec("stdio: {command: a}\nsuspend: true\nsuspend: false"),
		want: []string{`m.yaml:8: document 1 (line 1): spec.suspend: duplicate field (first at line 7)`}},
	{name: "duplicate label key", in: strings.Replace(withSpec(minimalStdio), "  name: demo\n", "  name: demo\n  labels: {a: x, a: y}\n", 1),
		want: []string{`m.yaml:5: document 1 (line 1): metadata.labels.a: duplicate key (first at line 5)`}},
	{name: "args not a list", in: withSpec("stdio: {command: a, args: -v}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.stdio.args: expected a list, got a string`}},
	{name: "args item a number", in: withSpec("stdio:\n  command: a\n  args: [--port, 8080]"),
		want: []string{`m.yaml:8: document 1 (line 1): spec.stdio.args[1]: expected a string, got an integer (quote the value to make it a string)`}},
	{name: "args item null", in: withSpec("stdio:\n  command: a\n  args: [-v, ~]"),
		want: []string{`m.yaml:8: document 1 (line 1): spec.stdio.args[1]: expected a string, got null`}},
	{name: "env item null", in: withSpec("stdio:\n  command: a\n  env:\n    - null"),
		want: []string{`m.yaml:9: document 1 (line 1): spec.stdio.env[0]: expected a mapping, got null`}},
	{name: "args item a boolean", in: withSpec("stdio:\n  command: a\n  args: [true]"),
		want: []string{`m.yaml:8: document 1 (line 1): spec.stdio.args[0]: expected a string, got a boolean (quote the value to make it a string)`}},
	{name: "stdio a string", in: withSpec("stdio: npx server"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.stdio: expected a mapping, got a string`}},
	{name: "suspend yes is not a boolean", in: withSpec(minimalStdio + "suspend: yes"),
		want: []string{`m.yaml:7: document 1 (line 1): spec.suspend: expected true or false, got a string ("yes" is a string in YAML 1.2: write true or false)`}},
	{name: "suspend quoted", in: withSpec(minimalStdio + `suspend: "true"`),
		want: []string{`m.yaml:7: document 1 (line 1): spec.suspend: expected true or false, got a string`}},
	{name: "env value yes stays the string yes", in: withSpec("stdio:\n  command: srv\n  env: [{name: A, value: yes}]")},
	{name: "env value a number, not echoed", in: withSpec("stdio:\n  command: srv\n  env: [{name: A, value: 8080}]"),
		want: []string{`m.yaml:8: document 1 (line 1): spec.stdio.env[0].value: expected a string, got an integer (quote the value to make it a string)`}},
	{name: "null leaves the default", in: withSpec(minimalStdio + "healthCheck: {interval: null}\ntools: ~")},
	{name: "unsupported tag", in: withSpec("stdio: {command: !!binary c3J2}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.stdio.command: unsupported YAML tag !!binary`}},
	{name: "custom tag", in: withSpec("stdio: !Stdio {command: srv}"),
		want: []string{`m.yaml:6: document 1 (line 1): spec.stdio: unsupported YAML tag !Stdio`}},
	{name: "merge key", in: withSpec("stdio:\n  <<: {command: srv}"),
		want: []string{
			`m.yaml:6: document 1 (line 1): spec.stdio.command: required`,
			`m.yaml:7: document 1 (line 1): spec.stdio: merge keys (<<) are not supported`,
		}},
	{name: "aliases are followed", in: withSpec("stdio:\n  command: &c srv\n  args: [*c, *c]")},
	{name: "complex key", in: withSpec(minimalStdio + "? [a]\n: b"),
		want: []string{`m.yaml:7: document 1 (line 1): spec: keys must be strings, got a list`}},
	{name: "document not a mapping", in: "- a\n- b\n",
		want: []string{`m.yaml:1: document 1 (line 1): expected a mapping (an McpConnection), got a list`}},
	{name: "document a scalar", in: "hello\n",
		want: []string{`m.yaml:1: document 1 (line 1): expected a mapping (an McpConnection), got a string`}},
	{name: "document null", in: "~\n",
		want: []string{`m.yaml:1: document 1 (line 1): expected a mapping (an McpConnection), got null`}},
	{name: "syntax error", in: withSpec("stdio: {command: [}"),
		want: []string{`m.yaml:6: document 1 (line 1): invalid YAML: did not find expected node content`}},
	{name: "tab indentation", in: header + "\tstdio: {command: a}\n",
		want: []string{`m.yaml:6: document 1 (line 1): invalid YAML: found character that cannot start any token`}},
}

// TestRules checks every validation rule of docs/contract.md §1 against its exact
// message.
func TestRules(t *testing.T) {
	for _, tt := range ruleCases {
		t.Run(tt.name, func(t *testing.T) {
			docs := DecodeFile("m.yaml", []byte(tt.in))
			if len(docs) != 1 {
				t.Fatalf("got %d documents, want 1", len(docs))
			}
			got := errorLines(docs[0].Errors)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("errors:\n got: %q\nwant: %q", got, tt.want)
			}
			if (docs[0].Conn == nil) != (len(tt.want) > 0) {
				t.Errorf("Conn = %v with %d errors: want a connection exactly when valid", docs[0].Conn, len(got))
			}
		})
	}
}

func errorLines(errs []*FieldError) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}
