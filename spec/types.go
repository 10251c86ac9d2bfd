package spec

import (
	"errors"
	"time"
)

// APIVersion and Kind identify an McpConnection manifest and its status document.
const (
	APIVersion = "tether.dev/v1alpha1"
	Kind       = "McpConnection"
)

// McpConnection is one manifest document: the desired state of one MCP connection.
//
// The comments on the fields of McpConnection and of the types below it are
// the descriptions of the manifest's JSON Schema (`tether schema`), which
// hack/schemagen generates from this file: write them for the person editing
// a manifest, in the manifest's field names. Lines starting with +tether: are
// markers that add what Go types cannot say (hack/schemagen lists them).
type McpConnection struct {
	// The version of the manifest format: tether.dev/v1alpha1.
	// +tether:enum=tether.dev/v1alpha1
	APIVersion string `json:"apiVersion"`
	// The kind of object: McpConnection.
	// +tether:enum=McpConnection
	Kind string `json:"kind"`
	// The connection's name and labels.
	Metadata ObjectMeta `json:"metadata"`
	// The desired state of the connection.
	Spec Spec `json:"spec"`
}

// ObjectMeta names a connection. Name is a DNS-1123 label, unique across the tree.
type ObjectMeta struct {
	// The connection's name, unique across the whole watched tree: a DNS-1123
	// label (at most 63 lowercase letters, digits and '-', starting and ending
	// with a letter or digit). It is the default toolPrefix.
	// +tether:pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$
	// +tether:patternMessage=A name is a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a letter or digit.
	// +tether:maxLength=63
	Name string `json:"name"`
	// Labels in the Kubernetes syntax, selectable with `tether run -l` and
	// `tether get -l`.
	Labels map[string]string `json:"labels,omitempty"`
}

// Spec is what the user declares. Exactly one of Stdio, HTTP and Container
// is set.
//
// Pointer fields distinguish "absent" from "zero": ToolPrefix nil means the
// default (metadata.name), "" means tool names are exposed unchanged.
//
// +tether:exactlyOneOf=stdio;http;container
type Spec struct {
	// Runs the server as a child process that speaks MCP on its stdin and
	// stdout. Exactly one of stdio, http and container.
	Stdio *StdioSpec `json:"stdio,omitempty"`
	// Connects to a server over HTTP (streamable HTTP or SSE). Exactly one of
	// stdio, http and container.
	HTTP *HTTPSpec `json:"http,omitempty"`
	// Runs the server as a container image with the host's container
	// runtime (docker or podman), speaking MCP on its stdin and stdout or
	// over streamable HTTP on a port. Exactly one of stdio, http and
	// container.
	Container *ContainerSpec `json:"container,omitempty"`
	// true: keep the manifest, disconnect and stop retrying.
	Suspend bool `json:"suspend,omitempty"`
	// Exposed tools are named <toolPrefix>_<tool>. Default: metadata.name;
	// "" exposes the server's tool and prompt names unchanged.
	// +tether:pattern=^[A-Za-z0-9_.-]*$
	// +tether:patternMessage=A tool prefix is made of letters, digits, '_', '-' and '.'.
	// +tether:maxLength=64
	ToolPrefix *string `json:"toolPrefix,omitempty"`
	// Glob filters on the server's own tool names. Default: every tool.
	Tools *ToolFilter `json:"tools,omitempty"`
	// The health check of a connected session (an MCP ping).
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
	// The reconnect backoff: from initial, doubling after each failed
	// attempt, up to max.
	Backoff *Backoff `json:"backoff,omitempty"`
	// Upper bound on one tools/call through the gateway. Default: 60s.
	CallTimeout *Duration `json:"callTimeout,omitempty"`
	// When the server runs. Default: always.
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
}

// Lifecycle modes for Lifecycle.Mode.
const (
	LifecycleAlways   = "Always"
	LifecycleOnDemand = "OnDemand"
)

// Lifecycle says when the server runs.
type Lifecycle struct {
	// Always (the default): connected all the time. OnDemand: started by the
	// first call that needs it and stopped after idleTimeout without a call
	// in flight or a subscription open; meanwhile the gateway serves the
	// catalog it published the last time it ran.
	// +tether:enum=Always;OnDemand
	Mode string `json:"mode,omitempty"`
	// OnDemand: stop the server after this long with no call in flight and
	// no subscription open. Default: 10m.
	IdleTimeout *Duration `json:"idleTimeout,omitempty"`
}

// StdioSpec starts the server as a child process speaking MCP on stdin/stdout.
type StdioSpec struct {
	// The program to run. A name without a slash is looked up on PATH; a
	// relative path with a slash (./bin/server) is resolved against the
	// manifest's directory. Checked when tether connects, not at validation.
	// +tether:minLength=1
	Command string `json:"command"`
	// The program's arguments.
	Args []string `json:"args,omitempty"`
	// The directory the program runs in; a relative one is resolved against
	// the manifest's directory. Default: tether's working directory.
	WorkingDir string `json:"workingDir,omitempty"`
	// Environment variables added to the few that tether passes on (PATH,
	// HOME, USER, LANG, TZ, ...); nothing else of tether's environment
	// reaches the server.
	Env []EnvVar `json:"env,omitempty"`
	// Confines the server with the kernel (Linux only: Landlock and
	// namespaces; docs/security.md): what it may read, write and execute,
	// which network it has, its resource limits. Absent: the server runs with
	// all of tether's user's rights, unless tether run --default-sandbox
	// names a policy.
	Sandbox *SandboxSpec `json:"sandbox,omitempty"`
}

// SandboxSpec is a least-privilege policy for a stdio server
// (docs/security.md). It starts from nothing: the server may use only what
// its grants and lists name.
type SandboxSpec struct {
	// What tether grants by name: command (the program, read and execute),
	// interpreter (the #! interpreter, and what /usr/bin/env runs),
	// libraries (the shared libraries they load), workingDir (read, when
	// workingDir is set: tether's own working directory is never granted),
	// tmp (a private temporary directory, read and write, as TMPDIR, removed
	// with the process), devices (/dev/null, /dev/zero, /dev/urandom,
	// /dev/random, /dev/full). Absent: all of them; [] grants nothing.
	Grants []string `json:"grants"`
	// Paths (files or directories, and everything below a directory) the
	// server may read. ~/ is the server's HOME (tether's, unless env sets
	// one); a relative path is resolved against the manifest's directory.
	Read []string `json:"read,omitempty"`
	// Paths the server may read and write (create, remove, rename below).
	Write []string `json:"write,omitempty"`
	// Paths the server may read and execute.
	Execute []string `json:"execute,omitempty"`
	// The network the server has: none (its own empty network namespace:
	// no interface, not even loopback, no abstract sockets of the host), loopback (its own
	// network namespace with only its own loopback interface), connect (the
	// host's network, TCP connect only to the ports listed in connect) or
	// all. Default none.
	// +tether:enum=none;loopback;connect;all
	Network string `json:"network,omitempty"`
	// With network connect: the TCP ports the server may connect to, as
	// "443" or "host:443". Landlock filters ports, not hosts: a host makes
	// the policy one the kernel cannot enforce fully.
	Connect []string `json:"connect,omitempty"`
	// With network connect: allow name resolution (connect to port 53, and
	// read /etc/resolv.conf, /etc/hosts, /etc/nsswitch.conf, /etc/gai.conf,
	// /etc/host.conf).
	DNS bool `json:"dns,omitempty"`
	// Resource limits (setrlimit) of the server and its children.
	Limits *SandboxLimits `json:"limits,omitempty"`
	// Run with what the kernel can enforce when it cannot enforce the whole
	// policy (an older Landlock, no user namespaces; with connect: UDP
	// before Landlock ABI 10, Multipath TCP enabled, a host), instead of
	// refusing to start the server (reason SandboxUnsupported).
	BestEffort bool `json:"bestEffort,omitempty"`
}

// Sandbox grant names (SandboxSpec.Grants).
const (
	GrantCommand     = "command"
	GrantInterpreter = "interpreter"
	GrantLibraries   = "libraries"
	GrantWorkingDir  = "workingDir"
	GrantTmp         = "tmp"
	GrantDevices     = "devices"
)

// SandboxGrants are the grant names, in the order docs/security.md lists
// them; an absent grants list grants them all.
var SandboxGrants = []string{GrantCommand, GrantInterpreter, GrantLibraries, GrantWorkingDir, GrantTmp, GrantDevices}

// Sandbox network modes (SandboxSpec.Network).
const (
	NetworkNone     = "none"
	NetworkLoopback = "loopback"
	NetworkConnect  = "connect"
	NetworkAll      = "all"
)

// SandboxLimits are resource limits of a sandboxed server.
type SandboxLimits struct {
	// The largest virtual address space of each process (RLIMIT_AS), as
	// bytes or with a suffix Ki, Mi, Gi: "2Gi". Runtimes reserve much more
	// than they use (Node about 1 GiB, Go's race detector far more).
	// +tether:pattern=^[0-9]+(Ki|Mi|Gi)?$
	Memory string `json:"memory,omitempty"`
	// The most processes (threads count) tether's user may have
	// (RLIMIT_NPROC: the kernel counts every process of the user, not only
	// the server's).
	// +tether:minimum=1
	Processes *int `json:"processes,omitempty"`
	// The most open files per process (RLIMIT_NOFILE).
	// +tether:minimum=3
	OpenFiles *int `json:"openFiles,omitempty"`
}

// Network modes of ContainerSpec.Network besides a network's name.
const (
	ContainerNetworkNone   = "none"
	ContainerNetworkBridge = "bridge"
)

// Container defaults (docs/contract.md §1).
const (
	DefaultContainerMemory uint64 = 512 << 20
	DefaultContainerPids          = 256
	DefaultContainerPath          = "/mcp"
	// ContainerSecretsDir is where a container finds its secretFiles.
	ContainerSecretsDir = "/run/secrets"
	// ContainerInitDir is where tether mounts what starts a container's
	// server with its env (reserved: no mount may use it).
	ContainerInitDir = "/.tether"
)

// ContainerSpec runs the server as a container image with the host's
// container runtime. Every env and secretFiles value is a secret: none
// reaches the runtime's command line or what `docker inspect` shows.
type ContainerSpec struct {
	// The image to run, as the runtime names it (repository[:tag] or
	// repository@digest). Pulled by the runtime when it is not present.
	// +tether:minLength=1
	// +tether:maxLength=512
	// +tether:pattern=^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$
	// +tether:patternMessage=An image is a reference such as example/server:1 (letters, digits, '.', '_', '/', ':', '@', '+' and '-', starting with a letter or digit).
	Image string `json:"image"`
	// Replaces the image's entrypoint (as a Kubernetes container's command
	// does). Default: the image's.
	Command []string `json:"command,omitempty"`
	// Replaces the image's arguments (its CMD). Default: the image's.
	Args []string `json:"args,omitempty"`
	// Environment variables the server gets beside the image's own. tether
	// sets them inside the container (its own static binary, mounted
	// read-only, starts the server with them), never on the runtime's
	// command line or in the container's configuration.
	Env []EnvVar `json:"env,omitempty"`
	// Secrets the server reads as files: each is the read-only file
	// /run/secrets/<name> in the container, written in a directory only
	// tether's user can reach and removed with the connection.
	SecretFiles []EnvVar `json:"secretFiles,omitempty"`
	// The container's network: none (the default: no network at all),
	// bridge (the runtime's default bridge network), or the name of a
	// network made with `docker network create`. host is refused.
	// +tether:pattern=^[A-Za-z0-9][A-Za-z0-9_.-]*$
	// +tether:patternMessage=A network is none, bridge or a network's name (letters, digits, '_', '.' and '-').
	Network string `json:"network,omitempty"`
	// The container port the server serves streamable HTTP on. tether
	// publishes it on 127.0.0.1 only, at a port the runtime picks, and
	// connects there. Needs a network other than none. Default: the server
	// speaks MCP on its stdin and stdout.
	// +tether:minimum=1
	Port int `json:"port,omitempty"`
	// With port: the path of the server's MCP endpoint. Default: /mcp.
	// +tether:pattern=^/[^?# \t\r\n]*$
	// +tether:patternMessage=A path is an absolute URL path such as /mcp.
	Path string `json:"path,omitempty"`
	// Host directories or files the container sees, read-only unless
	// marked writable.
	Mounts []Mount `json:"mounts,omitempty"`
	// The container's memory limit in bytes, or with a suffix Ki, Mi or Gi
	// (powers of 1024). Default: 512Mi.
	// +tether:pattern=^[0-9]+(Ki|Mi|Gi)?$
	// +tether:patternMessage=A memory limit is a number of bytes, optionally with Ki, Mi or Gi: 512Mi.
	Memory string `json:"memory,omitempty"`
	// The most processes (threads included) the container may run.
	// Default: 256.
	// +tether:minimum=1
	Pids *int `json:"pids,omitempty"`
	// The user (name or uid[:gid]) the server runs as. Default: the image's.
	// +tether:pattern=^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$
	// +tether:patternMessage=A user is a name or uid, optionally :group or :gid.
	// +tether:maxLength=253
	User string `json:"user,omitempty"`
}

// Mount is a host path a container sees.
type Mount struct {
	// The host path; a relative one is resolved against the manifest's
	// directory.
	// +tether:minLength=1
	Source string `json:"source"`
	// The absolute path in the container.
	// +tether:minLength=1
	Target string `json:"target"`
	// true: the container may write to it. Default: read-only.
	Writable bool `json:"writable,omitempty"`
}

// Transport names for HTTPSpec.Transport.
const (
	TransportStreamable = "streamable"
	TransportSSE        = "sse"
)

// HTTPSpec connects to a remote server over streamable HTTP or SSE.
type HTTPSpec struct {
	// The server's MCP endpoint: an http:// or https:// URL.
	// +tether:minLength=1
	URL string `json:"url"`
	// streamable (MCP's streamable HTTP, the default) or sse (the older
	// HTTP+SSE transport).
	// +tether:enum=streamable;sse
	Transport string `json:"transport,omitempty"`
	// HTTP headers sent with every request, e.g. Authorization.
	Headers []EnvVar `json:"headers,omitempty"`
	// OAuth 2.1 as the MCP authorization spec has it: tether discovers the
	// authorization server from the MCP server, gets access tokens, refreshes
	// them and sends them as the Authorization header (so no Authorization
	// header may be set beside it).
	OAuth *OAuthSpec `json:"oauth,omitempty"`
}

// OAuthSpec is how tether gets access tokens for a server that requires
// OAuth: exactly one of the two flows.
//
// +tether:exactlyOneOf=clientCredentials;authorizationCode
type OAuthSpec struct {
	// Machine to machine, with no person involved (the client credentials
	// grant): tether gets tokens with a client ID and secret registered
	// with the authorization server. Exactly one of clientCredentials and
	// authorizationCode.
	ClientCredentials *OAuthClientCredentials `json:"clientCredentials,omitempty"`
	// On behalf of a person (the authorization code grant with PKCE): a
	// person runs `tether login NAME` once; tether run then uses and
	// refreshes the tokens that login stored. Exactly one of
	// clientCredentials and authorizationCode.
	AuthorizationCode *OAuthAuthorizationCode `json:"authorizationCode,omitempty"`
}

// OAuthClientCredentials configures the client credentials grant.
type OAuthClientCredentials struct {
	// The client ID registered with the authorization server.
	// +tether:minLength=1
	ClientID string `json:"clientID"`
	// The client's secret: a value, or where to read it when tether
	// connects (valueFrom).
	ClientSecret SecretValue `json:"clientSecret"`
	// The scopes to ask for. Default: the ones the server names (in its
	// WWW-Authenticate challenge, else in its protected resource metadata).
	Scopes []string `json:"scopes,omitempty"`
}

// OAuthAuthorizationCode configures the authorization code grant.
type OAuthAuthorizationCode struct {
	// The scopes to ask for at login. Default: the ones the server names
	// (in its WWW-Authenticate challenge, else in its protected resource
	// metadata).
	Scopes []string `json:"scopes,omitempty"`
	// The client: a client ID registered with the authorization server
	// beforehand, or the https:// URL of a client ID metadata document that
	// describes tether. Default (and when the authorization server does not
	// take metadata documents): tether registers itself at login (dynamic
	// client registration).
	ClientID string `json:"clientID,omitempty"`
	// The secret of a registered confidential client (with a clientID that
	// is not a URL). A public client has none.
	ClientSecret *SecretValue `json:"clientSecret,omitempty"`
}

// SecretValue is a secret: exactly one of Value and ValueFrom.
//
// +tether:exactlyOneOf=value;valueFrom
type SecretValue struct {
	// The secret itself. Exactly one of value and valueFrom.
	Value *string `json:"value,omitempty"`
	// Where to read the secret when tether connects. Exactly one of value
	// and valueFrom.
	ValueFrom *ValueFrom `json:"valueFrom,omitempty"`
}

// EnvVar is an environment variable or an HTTP header: exactly one of Value and
// ValueFrom. Every resolved value is treated as a secret.
//
// +tether:exactlyOneOf=value;valueFrom
type EnvVar struct {
	// The variable's or header's name; unique in its list (header names
	// case-insensitively).
	// +tether:minLength=1
	Name string `json:"name"`
	// The value itself. Exactly one of value and valueFrom.
	Value *string `json:"value,omitempty"`
	// Where to read the value when tether connects. Exactly one of value and
	// valueFrom.
	ValueFrom *ValueFrom `json:"valueFrom,omitempty"`
}

// ValueFrom reads a value at connect time: exactly one of File, Env and
// SecretKeyRef.
//
// +tether:exactlyOneOf=file;env;secretKeyRef
type ValueFrom struct {
	// A file that holds the value (a keyfile), without its trailing newline;
	// a relative path is resolved against the manifest's directory.
	File string `json:"file,omitempty"`
	// A variable of tether's own environment that holds the value.
	Env string `json:"env,omitempty"`
	// A key of a Secret in the McpConnection's namespace; only in
	// Kubernetes mode (tether run --kubernetes), where tether watches the
	// Secret and reconnects when the value changes.
	SecretKeyRef *SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// SecretKeySelector names one key of a Kubernetes Secret in the namespace of
// the McpConnection that refers to it.
type SecretKeySelector struct {
	// The Secret's name.
	// +tether:pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$
	// +tether:patternMessage=A Secret's name is a DNS-1123 subdomain: lowercase letters, digits, '-' and '.'.
	// +tether:maxLength=253
	Name string `json:"name"`
	// The key of the Secret's data that holds the value.
	// +tether:pattern=^[-._a-zA-Z0-9]+$
	// +tether:patternMessage=A Secret's key is made of letters, digits, '-', '_' and '.'.
	// +tether:maxLength=253
	Key string `json:"key"`
}

// ToolFilter selects the server's tools by glob (path.Match syntax) on the
// server's own tool names. Empty Allow means all; Deny wins over Allow.
type ToolFilter struct {
	// Globs (path.Match syntax, e.g. "get_*") of the tools to expose. Empty:
	// every tool.
	Allow []string `json:"allow,omitempty"`
	// Globs of the tools to hide; deny wins over allow.
	Deny []string `json:"deny,omitempty"`
}

// HealthCheck configures the probe of a connected session.
type HealthCheck struct {
	// Time between two health checks of a connected session. Default: 30s.
	Interval *Duration `json:"interval,omitempty"`
	// Bound on one health check. Default: 5s.
	Timeout *Duration `json:"timeout,omitempty"`
	// Failed health checks in a row that make tether reconnect. Default: 3.
	// +tether:minimum=1
	FailureThreshold *int `json:"failureThreshold,omitempty"`
}

// Backoff overrides the default reconnect backoff.
type Backoff struct {
	// The first reconnect delay. Default: 100ms.
	Initial *Duration `json:"initial,omitempty"`
	// The longest reconnect delay. Default: 3s.
	Max *Duration `json:"max,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("100ms", "1m30s").
// In the schema it is a string of one or more <number><unit> (units ns, us,
// µs, ms, s, m, h); validation then requires it to be positive.
//
// +tether:type=string
// +tether:pattern=^\+?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$
// +tether:patternMessage=A duration is a number and a unit (ns, us, ms, s, m or h), repeated: 30s, 1m30s, 100ms.
type Duration struct {
	time.Duration
}

// Defaults of docs/contract.md §1.
const (
	DefaultHealthInterval   = 30 * time.Second
	DefaultHealthTimeout    = 5 * time.Second
	DefaultFailureThreshold = 3
	DefaultBackoffInitial   = 100 * time.Millisecond
	DefaultBackoffMax       = 3 * time.Second
	DefaultCallTimeout      = 60 * time.Second
	DefaultIdleTimeout      = 10 * time.Minute
)

// Phase is the coarse, human-facing state of a connection.
type Phase string

const (
	PhasePending      Phase = "Pending"
	PhaseConnecting   Phase = "Connecting"
	PhaseConnected    Phase = "Connected"
	PhaseDegraded     Phase = "Degraded"
	PhaseReconnecting Phase = "Reconnecting"
	PhaseIdle         Phase = "Idle"
	PhaseAuthRequired Phase = "AuthRequired"
	PhaseRefused      Phase = "Refused"
	PhaseSuspended    Phase = "Suspended"
	PhaseInvalid      Phase = "Invalid"
)

// Phases lists every phase in a stable order (metrics are one-hot over it).
var Phases = []Phase{PhasePending, PhaseConnecting, PhaseConnected, PhaseDegraded, PhaseReconnecting, PhaseIdle, PhaseAuthRequired, PhaseRefused, PhaseSuspended, PhaseInvalid}

// StatusDocument is one document of a status file (<manifest-base>.status.yaml).
//
// Its field comments, and those of the types below it, are the descriptions
// of the status schema that hack/schemagen generates; the
// CustomResourceDefinition (`tether crd`) takes the status subresource's
// schema from it.
type StatusDocument struct {
	// The version of the status format: tether.dev/v1alpha1.
	// +tether:enum=tether.dev/v1alpha1
	APIVersion string `json:"apiVersion"`
	// The kind of object: McpConnection.
	// +tether:enum=McpConnection
	Kind string `json:"kind"`
	// The connection's name, as its manifest has it.
	Metadata ObjectMeta `json:"metadata"`
	// The observed state of the connection, written by tether.
	Status ConnectionStatus `json:"status"`
}

// ConnectionStatus is the observed state of a connection (docs/contract.md §3).
type ConnectionStatus struct {
	// The connection's state, for people (programs read conditions).
	Phase Phase `json:"phase"`
	// The metadata.generation of the McpConnection object this status
	// describes, in Kubernetes mode; absent in a status file.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// The hash of the spec this status describes.
	ObservedSpecHash string `json:"observedSpecHash,omitempty"`
	// Ready, Reconciling and Stalled, as kstatus defines them.
	Conditions []Condition `json:"conditions"`
	// What the server said about itself when it initialized.
	Server *ServerInfo `json:"server,omitempty"`
	// How many tools the server has, and how many of them are exposed.
	Tools *Counts `json:"tools,omitempty"`
	// How many prompts the server has, and how many of them are exposed;
	// absent when it has none.
	Prompts *Counts `json:"prompts,omitempty"`
	// How many resources the server lists, and how many of them are
	// exposed; absent when it lists none.
	Resources *Counts `json:"resources,omitempty"`
	// How many resource templates the server has, and how many of them are
	// exposed; absent when it has none.
	ResourceTemplates *Counts `json:"resourceTemplates,omitempty"`
	// What the server publishes (tools, prompts, resources, templates), and
	// how it last moved.
	Catalog *CatalogStatus `json:"catalog,omitempty"`
	// Failed attempts since the last success.
	Attempt int `json:"attempt"`
	// The last connect or health-check error, secrets redacted.
	LastError string `json:"lastError"`
	// When the next attempt starts, while the connection waits to retry.
	NextRetryTime *time.Time `json:"nextRetryTime"`
	// When the current session was established.
	ConnectedSince *time.Time `json:"connectedSince,omitempty"`
	// The stdio server's process, or the container a container server
	// runs in.
	Process *ProcessStatus `json:"process,omitempty"`
	// What confines the live server, in a few words ("landlock fs+net",
	// "landlock fs (best effort)", "container docker network=none"); absent
	// when nothing does (docs/security.md).
	Sandbox string `json:"sandbox,omitempty"`
	// Why the manifest cannot be used; set while it is invalid (tether keeps
	// the last valid spec, if there was one).
	ManifestError string `json:"manifestError"`
	// Exposed names (tools; prompt:, resource: and resourceTemplate: for the
	// rest of the catalog) that this connection and another both offer: lost
	// to the other, or kept (kept: true) against it.
	Collisions []ToolCollision `json:"collisions,omitempty"`
	// Names of the server's catalog the gateway does not serve as the server
	// offers them (a tool or prompt name with control or bidi characters or
	// longer than 128 characters; a resource template that matches any URI).
	NameWarnings []NameWarning `json:"nameWarnings,omitempty"`
}

// CatalogStatus tells what a server publishes and when that last changed,
// so that an upgrade that drops a tool shows (and can be alerted on).
type CatalogStatus struct {
	// sha256 of the tool, prompt and resource definitions.
	Hash string `json:"hash"`
	// When the hash last changed (first seen, for a new connection).
	ChangedTime *time.Time `json:"changedTime,omitempty"`
	// What that change added: tool names, "prompt:<name>",
	// "resource:<uri>", "resourceTemplate:<template>" (at most 20).
	Added []string `json:"added,omitempty"`
	// What that change removed, named like added (at most 20).
	Removed []string `json:"removed,omitempty"`
}

// Condition follows the kstatus conventions (Ready, Reconciling, Stalled).
type Condition struct {
	// Ready, Reconciling or Stalled.
	Type string `json:"type"`
	// True, False or Unknown.
	// +tether:enum=True;False;Unknown
	Status string `json:"status"`
	// Why the condition has its status, in one CamelCase word.
	Reason string `json:"reason"`
	// The details, for people.
	Message string `json:"message"`
	// When the status last changed.
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

// Condition types and statuses.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"

	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// Condition reasons, as status documents carry them.
const (
	ReasonConnected       = "Connected"
	ReasonConnecting      = "Connecting"
	ReasonConnectFailed   = "ConnectFailed"
	ReasonAuthRequired    = "AuthRequired"
	ReasonHealthCheckFail = "HealthCheckFailing"
	ReasonSuspended       = "Suspended"
	ReasonIdle            = "Idle"
	ReasonManifestInvalid = "ManifestInvalid"
	ReasonStopped         = "Stopped"
	ReasonPending         = "Pending"
	ReasonSucceeded       = "Succeeded"
	// The kernel cannot enforce the server's sandbox fully and the
	// manifest did not accept less (spec.stdio.sandbox.bestEffort).
	ReasonSandboxUnsupported = "SandboxUnsupported"
	// tether refuses the server's confinement policy itself: a sandbox
	// grant or a writable container mount that reaches what tether
	// protects (its state directory, its executable, the manifest tree).
	// Nothing runs until the spec changes.
	ReasonPolicyRefused = "PolicyRefused"
)

// InvalidStatus is the status of a manifest document tether cannot use (it
// does not decode, or its name is taken): phase Invalid, Ready False and
// Stalled True with the problem as their message and as manifestError.
func InvalidStatus(problem string, since time.Time) ConnectionStatus {
	cond := func(typ, status, reason, msg string) Condition {
		return Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: since}
	}
	return ConnectionStatus{
		Phase:         PhaseInvalid,
		ManifestError: problem,
		Conditions: []Condition{
			cond(ConditionReady, ConditionFalse, ReasonManifestInvalid, problem),
			cond(ConditionReconciling, ConditionFalse, ReasonSucceeded, ""),
			cond(ConditionStalled, ConditionTrue, ReasonManifestInvalid, problem),
		},
	}
}

// ServerInfo is what the server said about itself when it initialized.
type ServerInfo struct {
	// The server's name.
	Name string `json:"name"`
	// The server's version.
	Version string `json:"version"`
	// The MCP protocol version the session speaks.
	ProtocolVersion string `json:"protocolVersion"`
}

// Counts counts what the server lists of one kind (tools, prompts,
// resources, resource templates) and how much of it the gateway exposes:
// tools after the filters, any of them minus the names lost to another
// connection.
type Counts struct {
	// What the server lists.
	Count int `json:"count"`
	// What the gateway exposes of it.
	Exposed int `json:"exposed"`
}

// ProcessOf returns the stdio child's facts (pid, exit code, stderr tail)
// that err carries: an error in its chain with a ProcessStatus method, as
// controller/connection's errors of a failed child have. nil otherwise.
func ProcessOf(err error) *ProcessStatus {
	var pe interface{ ProcessStatus() *ProcessStatus }
	if errors.As(err, &pe) {
		return pe.ProcessStatus()
	}
	return nil
}

// ProcessStatus describes a stdio child, or for a container server the
// container and the runtime's process that tether watches it through.
type ProcessStatus struct {
	// The process ID of the running child (for a container server, of the
	// runtime's command that runs it).
	PID int `json:"pid,omitempty"`
	// The name of the container the server runs in, while it runs.
	Container string `json:"container,omitempty"`
	// The container runtime (docker or podman) that runs it.
	Runtime string `json:"runtime,omitempty"`
	// How many times the child was started again after the first start.
	Restarts int `json:"restarts"`
	// The exit code of the last child that exited.
	LastExitCode *int `json:"lastExitCode,omitempty"`
	// The last lines the child wrote to stderr, secrets redacted.
	StderrTail []string `json:"stderrTail,omitempty"`
}

// ToolCollision records an exposed name this connection and another both
// offer.
type ToolCollision struct {
	// The exposed name.
	Tool string `json:"tool"`
	// The other connection: the one that exposes it, or with kept, the one
	// that offers it too and does not get it.
	Connection string `json:"connection"`
	// True when this connection keeps the name (it served it first).
	Kept bool `json:"kept,omitempty"`
}

// NameWarning is a name of a server's catalog that the gateway does not
// serve as offered, and why.
type NameWarning struct {
	// The name, with its kind ("tool:", "prompt:", "resourceTemplate:"),
	// quoted with Go escapes when it holds anything but printable ASCII and
	// cut to 80 characters.
	Name string `json:"name"`
	// What the gateway does with it and why.
	Warning string `json:"warning"`
}
