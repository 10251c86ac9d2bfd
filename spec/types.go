package spec

import (
	"time"
)

// APIVersion and Kind identify an McpConnection manifest and its status document.
const (
	APIVersion = "tether.dev/v1alpha1"
	Kind       = "McpConnection"
)

// McpConnection is one manifest document: the desired state of one MCP connection.
type McpConnection struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   ObjectMeta `json:"metadata"`
	Spec       Spec       `json:"spec"`
}

// ObjectMeta names a connection. Name is a DNS-1123 label, unique across the tree.
type ObjectMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Spec is what the user declares. Exactly one of Stdio and HTTP is set.
//
// Pointer fields distinguish "absent" from "zero": ToolPrefix nil means the
// default (metadata.name), "" means tool names are exposed unchanged.
type Spec struct {
	Stdio       *StdioSpec   `json:"stdio,omitempty"`
	HTTP        *HTTPSpec    `json:"http,omitempty"`
	Suspend     bool         `json:"suspend,omitempty"`
	ToolPrefix  *string      `json:"toolPrefix,omitempty"`
	Tools       *ToolFilter  `json:"tools,omitempty"`
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
	Backoff     *Backoff     `json:"backoff,omitempty"`
	CallTimeout *Duration    `json:"callTimeout,omitempty"`
}

// StdioSpec starts the server as a child process speaking MCP on stdin/stdout.
type StdioSpec struct {
	Command    string   `json:"command"`
	Args       []string `json:"args,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	Env        []EnvVar `json:"env,omitempty"`
}

// Transport names for HTTPSpec.Transport.
const (
	TransportStreamable = "streamable"
	TransportSSE        = "sse"
)

// HTTPSpec connects to a remote server over streamable HTTP or SSE.
type HTTPSpec struct {
	URL       string   `json:"url"`
	Transport string   `json:"transport,omitempty"`
	Headers   []EnvVar `json:"headers,omitempty"`
}

// EnvVar is an environment variable or an HTTP header: exactly one of Value and
// ValueFrom. Every resolved value is treated as a secret.
type EnvVar struct {
	Name      string     `json:"name"`
	Value     *string    `json:"value,omitempty"`
	ValueFrom *ValueFrom `json:"valueFrom,omitempty"`
}

// ValueFrom reads a value at connect time: exactly one of File, Env and
// SecretKeyRef.
type ValueFrom struct {
	File string `json:"file,omitempty"`
	Env  string `json:"env,omitempty"`
	// SecretKeyRef reads a key of a Secret in the object's namespace; only in
	// Kubernetes mode (tether run --kubernetes).
	SecretKeyRef *SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// SecretKeySelector names one key of a Kubernetes Secret in the namespace of
// the McpConnection that refers to it.
type SecretKeySelector struct {
	// The Secret's name.
	Name string `json:"name"`
	// The key of the Secret's data that holds the value.
	Key string `json:"key"`
}

// ToolFilter selects the server's tools by glob (path.Match syntax) on the
// server's own tool names. Empty Allow means all; Deny wins over Allow.
type ToolFilter struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// HealthCheck configures the probe of a connected session.
type HealthCheck struct {
	Interval         *Duration `json:"interval,omitempty"`
	Timeout          *Duration `json:"timeout,omitempty"`
	FailureThreshold *int      `json:"failureThreshold,omitempty"`
}

// Backoff overrides the default reconnect backoff.
type Backoff struct {
	Initial *Duration `json:"initial,omitempty"`
	Max     *Duration `json:"max,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("100ms", "1m30s").
type Duration struct {
	time.Duration
}

// Defaults of DESIGN §1.
const (
	DefaultHealthInterval   = 30 * time.Second
	DefaultHealthTimeout    = 5 * time.Second
	DefaultFailureThreshold = 3
	DefaultBackoffInitial   = 100 * time.Millisecond
	DefaultBackoffMax       = 3 * time.Second
	DefaultCallTimeout      = 60 * time.Second
)

// Phase is the coarse, human-facing state of a connection.
type Phase string

const (
	PhasePending      Phase = "Pending"
	PhaseConnecting   Phase = "Connecting"
	PhaseConnected    Phase = "Connected"
	PhaseDegraded     Phase = "Degraded"
	PhaseReconnecting Phase = "Reconnecting"
	PhaseSuspended    Phase = "Suspended"
	PhaseInvalid      Phase = "Invalid"
)

// Phases lists every phase in a stable order (metrics are one-hot over it).
var Phases = []Phase{PhasePending, PhaseConnecting, PhaseConnected, PhaseDegraded, PhaseReconnecting, PhaseSuspended, PhaseInvalid}

// StatusDocument is one document of a status file (<manifest-base>.status.yaml).
type StatusDocument struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   ObjectMeta       `json:"metadata"`
	Status     ConnectionStatus `json:"status"`
}

// ConnectionStatus is the observed state of a connection (DESIGN §3).
type ConnectionStatus struct {
	Phase Phase `json:"phase"`
	// ObservedGeneration is the metadata.generation of the object this
	// status describes, in Kubernetes mode (0, and absent, for a file).
	ObservedGeneration int64          `json:"observedGeneration,omitempty"`
	ObservedSpecHash   string         `json:"observedSpecHash,omitempty"`
	Conditions         []Condition    `json:"conditions"`
	Server             *ServerInfo    `json:"server,omitempty"`
	Tools              *ToolCounts    `json:"tools,omitempty"`
	Attempt            int            `json:"attempt"`
	LastError          string         `json:"lastError"`
	NextRetryTime      *time.Time     `json:"nextRetryTime"`
	ConnectedSince     *time.Time     `json:"connectedSince,omitempty"`
	Process            *ProcessStatus `json:"process,omitempty"`
	ManifestError      string         `json:"manifestError"`
	// Collisions lists exposed tool names this connection lost to another one.
	Collisions []ToolCollision `json:"collisions,omitempty"`
}

// Condition follows the kstatus conventions (Ready, Reconciling, Stalled).
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"` // "True" | "False" | "Unknown"
	Reason             string    `json:"reason"`
	Message            string    `json:"message"`
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
	ReasonHealthCheckFail = "HealthCheckFailing"
	ReasonSuspended       = "Suspended"
	ReasonManifestInvalid = "ManifestInvalid"
	ReasonStopped         = "Stopped"
	ReasonPending         = "Pending"
	ReasonSucceeded       = "Succeeded"
)

// ServerInfo is what the server said about itself when it initialized.
type ServerInfo struct {
	Name            string `json:"name"`
	Version         string `json:"version"`
	ProtocolVersion string `json:"protocolVersion"`
}

// ToolCounts counts the server's tools and those exposed after filters.
type ToolCounts struct {
	Count   int `json:"count"`
	Exposed int `json:"exposed"`
}

// ProcessStatus describes a stdio child.
type ProcessStatus struct {
	PID          int      `json:"pid,omitempty"`
	Restarts     int      `json:"restarts"`
	LastExitCode *int     `json:"lastExitCode,omitempty"`
	StderrTail   []string `json:"stderrTail,omitempty"`
}

// ToolCollision records an exposed tool name this connection lost to another.
type ToolCollision struct {
	Tool       string `json:"tool"`
	Connection string `json:"connection"`
}
