package connection

import (
	"context"
	"crypto/sha256"
	"net/http"
	"time"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// Connector is what the sessions of one tether share: the handshake gate
// and the protocol-version memory of each HTTP endpoint, the HTTP transport
// (one connection pool), the table of tool definitions they all hold, and
// the ledger of the process groups their children run in. The daemon makes
// one and passes it where sessions are opened; a test makes its own, so
// that nothing it does reaches another test's sessions.
type Connector struct {
	handshakes           *endpointGates
	perEndpoint          int // handshakes in flight per endpoint
	versions             *versionMemo
	transport            *http.Transport   // the connection pool
	httpBase             http.RoundTripper // the pool, with event streams on their own connections (streams.go)
	tools                *internTable
	ledger               *GroupLedger      // nil: children are not recorded
	containers           *ContainerRuntime // nil: no container runtime
	ownedBySoleSession   bool              // made by Connect for one session, which lets it go on Close
	defaultSandbox       *spec.SandboxSpec
	defaultSandboxOrigin string
	sandboxTemp          string
	stateDir             string
	manifestRoot         string
	manifestDirs         func() []string
	// resumeWait waits before an event stream is resumed (nil: sleepCtx);
	// tests record the delays with it (Session.waitToResume).
	resumeWait func(ctx context.Context, d time.Duration) error
}

// ConnectorOptions configure a Connector; the zero value is a Connector
// without a ledger.
type ConnectorOptions struct {
	// Ledger records the process group of every stdio child started
	// (tether run, with a state directory); nil records none.
	Ledger *GroupLedger
	// HandshakesPerEndpoint bounds the handshakes in flight to one HTTP
	// endpoint (0: DefaultHandshakesPerEndpoint).
	HandshakesPerEndpoint int
	// DefaultSandbox confines every stdio server whose manifest sets no
	// spec.stdio.sandbox (tether run --default-sandbox); nil confines none.
	DefaultSandbox *spec.SandboxSpec
	// DefaultSandboxFile is the file DefaultSandbox was read from: errors
	// about that policy name it ("--default-sandbox FILE: write[0]"), not
	// the manifest's spec.stdio.sandbox, which it does not set.
	DefaultSandboxFile string
	// SandboxTemp is where sandboxed servers' private TMPDIRs are made
	// (PrepareSandboxTemp); "" is the system's temporary directory.
	SandboxTemp string
	// Containers runs spec.container servers; nil: a container server
	// fails to connect with an error that says no runtime was found.
	Containers *ContainerRuntime
	// StateDir is tether's state directory ("" without one), which no
	// sandbox grant may hold (it keeps OAuth tokens).
	StateDir string
	// ManifestRoot is the manifest tree tether watches (tether run
	// --dir; "" in Kubernetes mode). No sandbox write grant nor writable
	// container mount may lie in a directory tether reads manifests from
	// (manifest.ListTree's: the symlinked ones too), but beneath a hidden
	// name, nor hold one: a manifest the server wrote there would run on
	// the host, unconfined.
	ManifestRoot string
	// ManifestDirs, when set, returns the directories of the manifest tree
	// as the manifest source last listed them (manifest.Source.Dirs): a
	// connect then takes those instead of listing the tree at ManifestRoot
	// itself, which costs every sandboxed connect a walk of the whole tree
	// (about 2 ms at 1,000 manifests: seconds of a start of 1,000). A nil
	// answer (no listing yet) lists the tree.
	ManifestDirs func() []string
}

// NewConnector returns a Connector whose sessions share what o says and
// what it makes: its own gates, memory, transport and tool table.
func NewConnector(o ConnectorOptions) *Connector {
	per := o.HandshakesPerEndpoint
	if per <= 0 {
		per = DefaultHandshakesPerEndpoint
	}
	pool := newSharedHTTPTransport()
	c := &Connector{
		handshakes:           &endpointGates{gates: map[string]*endpointGate{}},
		perEndpoint:          per,
		versions:             &versionMemo{m: make(map[string]*endpointVersion)},
		transport:            pool,
		httpBase:             &eventStreams{pool: pool},
		tools:                &internTable{m: make(map[[sha256.Size]byte]weak.Pointer[mcp.Tool])},
		ledger:               o.Ledger,
		defaultSandbox:       o.DefaultSandbox,
		defaultSandboxOrigin: "--default-sandbox",
		sandboxTemp:          o.SandboxTemp,
		containers:           o.Containers,
		stateDir:             o.StateDir,
		manifestRoot:         o.ManifestRoot,
		manifestDirs:         o.ManifestDirs,
	}
	if o.DefaultSandboxFile != "" {
		c.defaultSandboxOrigin += " " + o.DefaultSandboxFile
	}
	return c
}

// Close closes the transport's idle connections. Sessions still open keep
// working; it is for the end of the daemon or of a test.
func (c *Connector) Close() { c.transport.CloseIdleConnections() }

// Connect opens one session with a Connector of its own, which its Close
// lets go: for a one-off session (tether login, tests). Sessions that share
// a tether's gates, memory and connection pool come from Connector.Connect.
func Connect(ctx context.Context, req Request) (*Session, error) {
	c := NewConnector(ConnectorOptions{})
	c.ownedBySoleSession = true
	s, err := c.Connect(ctx, req)
	if err != nil {
		c.Close()
	}
	return s, err
}
