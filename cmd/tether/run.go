package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tether-mcp/tether/controller"
	"github.com/tether-mcp/tether/controller/boundedfile"
	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/gateway"
	"github.com/tether-mcp/tether/controller/httpguard"
	"github.com/tether-mcp/tether/controller/kubernetes"
	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/controller/metrics"
	"github.com/tether-mcp/tether/controller/oauth"
	"github.com/tether-mcp/tether/controller/owner"
	"github.com/tether-mcp/tether/controller/state"
	"github.com/tether-mcp/tether/controller/statusfile"
	"github.com/tether-mcp/tether/controller/tracing"
	"github.com/tether-mcp/tether/spec"
)

// minMaxMessageBytes is the smallest --max-message-bytes: below it, even a
// server's initialize result or tools/list would not fit.
const minMaxMessageBytes = 4 << 10

type runOptions struct {
	dir           string
	statusDir     string
	stateDir      string
	selector      string
	listen        string
	stdio         bool
	metricsAddr   string
	authTokenFile string
	workers       int
	resync        time.Duration
	shutdown      time.Duration
	connect       time.Duration
	logFormat     string
	logLevel      string
	listenSet     bool
	metricsSet    bool

	statusWriteInterval time.Duration

	kubernetes    bool
	namespace     string
	allNamespaces bool
	kubeconfig    string
	leaderElect   bool
	lease         kubernetes.LeaderElectionOptions

	maxStateFile          int64 // Limits on files (docs/contract.md)
	maxNameLength         int
	maxCatchAllTemplates  int
	maxTemplatesPerPrefix int
	// Limits on what clients send (docs/contract.md §5a).
	requestReadTimeout time.Duration
	maxConnections     int
	allowedOrigins     []string
	maxSessions        int
	maxSessionsClient  int
	maxCallsInFlight   int
	maxSubsPerSession  int
	maxSubs            int
	maxBytesInFlight   int64
	streamWrite        time.Duration
	maxMessageBytes    int64

	// ownerWait bounds a bridge's wait for the directory's owner.
	ownerWait time.Duration
	// takeover is set when this run took the directory over from its
	// owner as a bridge (owner.go): the lock is held already, and the
	// run's own client is the bridge's.
	takeover         *takeover
	sse              bool // the legacy HTTP+SSE endpoint (docs/contract.md §5)
	defaultSandbox   string
	containerRuntime string // spec.container's runtime (docs/contract.md §6)
	// sessionIdle closes a gateway HTTP session idle that long; <= 0 never.
	sessionIdle time.Duration
}

func newRunCmd() *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run (--dir DIR | --kubernetes)",
		Short: "Run the controller: keep the connections the manifests in DIR (or a cluster's McpConnections) declare",
		Long: `run watches DIR (recursively) for McpConnection manifests, connects to every
server they declare, keeps the connections healthy, writes a status file beside
each manifest and serves every connected server's tools through one MCP endpoint.

With --kubernetes the manifests are McpConnection objects (tether.dev/v1alpha1)
in a cluster instead, watched through the API server, and status goes to each
object's status subresource. tether uses its pod's service account in a
cluster, and --kubeconfig (or $KUBECONFIG, ~/.kube/config) otherwise. It
watches the namespace it runs in (the kubeconfig context's outside a
cluster), another with --namespace, or all with --all-namespaces; in one
namespace a connection is named after its object, across all of them
<namespace>.<name>. With --leader-elect several replicas may run: all serve
the gateway, the one that holds a Lease (named --leader-elect-lease-name, in
the watched namespace or, with --all-namespaces, in tether's own) writes
status.

A directory has one owner: the tether run that holds the lock on its state
directory, and serves a control socket there. Another tether run on it exits 3
naming the owner; another tether run --stdio bridges its client to the owner
(every agent shares one set of servers) and, when the owner goes, one bridge
takes over. tether connect is that bridge for a daemon-owned directory.`,
		Example: `  # run on a directory of manifests, gateway on 127.0.0.1:8808/mcp
  tether run --dir ./manifests

  # a read-only manifest tree (a ConfigMap, a git-sync checkout)
  tether run --dir /etc/tether --status-dir /var/lib/tether/status

  # only the connections labelled team=infra, serving MCP on stdin/stdout
  tether run --dir ./manifests -l team=infra --stdio

  # in a cluster, two or more replicas behind a Service
  tether run --kubernetes --leader-elect --listen :8808 --auth-token-file /run/secrets/tether/token

  # from a workstation, against the namespace mcp
  tether run --kubernetes --kubeconfig ~/.kube/config --namespace mcp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.listenSet = cmd.Flags().Changed("listen")
			o.metricsSet = cmd.Flags().Changed("metrics-addr")
			// Under Windows' service control manager, a service Stop is
			// a SIGTERM (docs/contract.md §11).
			ctx, serviceDone, err := asService(cmd.Context())
			if err != nil {
				return err
			}
			err = runController(ctx, o, cmd.ErrOrStderr())
			serviceDone(err)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "directory of McpConnection manifests (watched recursively)")
	f.StringVar(&o.statusDir, "status-dir", "", "write status files under this directory (mirroring the tree) instead of beside the manifests")
	f.StringVar(&o.stateDir, "state-dir", "", "where tether keeps what it needs between runs (the last valid spec of each connection, OAuth tokens); default: "+state.DirName+" under --status-dir, else under --dir")
	f.StringVarP(&o.selector, "selector", "l", "", "only manifests whose labels match this selector (e.g. team=infra,env!=dev)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8808", "address of the gateway's streamable HTTP endpoint (/mcp); empty disables it")
	f.BoolVar(&o.stdio, "stdio", false, "serve the gateway on stdin/stdout instead of --listen (logs go to stderr)")
	f.StringVar(&o.metricsAddr, "metrics-addr", "127.0.0.1:9464", "address of /metrics, /healthz and /readyz; empty disables it")
	f.StringVar(&o.authTokenFile, "auth-token-file", "", "file holding the bearer token the gateway requires (needed for a non-loopback --listen)")
	f.IntVar(&o.workers, "workers", 4, "number of reconcile workers")
	f.DurationVar(&o.resync, "resync", 5*time.Minute, "re-read every manifest and reconcile every connection this often")
	f.DurationVar(&o.connect, "connect-timeout", controller.DefaultConnectTimeout, "bound on one connect attempt (start, initialize, tools/list); a server that takes longer is retried with backoff")
	f.DurationVar(&o.shutdown, "shutdown-timeout", 15*time.Second, "bound on closing every connection at shutdown")
	f.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.BoolVar(&o.kubernetes, "kubernetes", false, "take McpConnection objects from a cluster instead of --dir, and write their status subresource")
	f.StringVar(&o.namespace, "namespace", "", "with --kubernetes: the namespace to watch (default: the one tether runs in, or the kubeconfig context's)")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "with --kubernetes: watch every namespace (connections are named <namespace>.<name>)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "with --kubernetes: the kubeconfig file (default: the pod's service account in a cluster, else $KUBECONFIG or ~/.kube/config)")
	f.BoolVar(&o.leaderElect, "leader-elect", false, "with --kubernetes: elect the replica that writes status through a coordination.k8s.io Lease (for several replicas)")
	f.StringVar(&o.lease.LeaseName, "leader-elect-lease-name", "tether", "the name of the Lease")
	f.DurationVar(&o.lease.LeaseDuration, "leader-elect-lease-duration", kubernetes.DefaultLeaseDuration, "how long the other replicas wait after the leader's last renewal before one takes over")
	f.DurationVar(&o.lease.RenewDeadline, "leader-elect-renew-deadline", kubernetes.DefaultRenewDeadline, "how long the leader keeps trying to renew before it stops writing status")
	f.DurationVar(&o.lease.RetryPeriod, "leader-elect-retry-period", kubernetes.DefaultRetryPeriod, "how often replicas try to take or renew the Lease")

	// Limits on files (docs/contract.md, 5a).
	f.Int64Var(&o.maxStateFile, "max-state-file-size", state.DefaultMaxFileSize, "largest file read from the state directory (a saved spec, catalog or process-group record); a bigger one is ignored with an error naming it")
	// Routing by ownership (docs/contract.md §5a).
	f.IntVar(&o.maxNameLength, "max-name-length", gateway.DefaultMaxNameLength, "the longest tool or prompt name (prefix included, in characters) the gateway exposes; a longer one is not exposed and is reported in its connection's status")
	// Limits on what clients send (docs/contract.md, "Limits on what clients send").
	f.DurationVar(&o.requestReadTimeout, "request-read-timeout", gateway.DefaultRequestReadTimeout, "bound on the arrival of a gateway request's body once its headers are in; a slower client's connection is closed")
	f.IntVar(&o.maxConnections, "max-connections", gateway.DefaultMaxConnections, "bound on the gateway's open client connections (lowered to half the descriptor limit); at the bound the one stalled the longest is closed for a new one")
	f.StringSliceVar(&o.allowedOrigins, "allowed-origins", nil, "Origin values the gateway and /metrics admit (scheme://host[:port], \"*\"); loopback origins always; a request with another Origin gets 403")
	f.IntVar(&o.maxSessions, "max-sessions", gateway.DefaultMaxSessions, "bound on the gateway's HTTP sessions; past it the least recently used idle one is closed, or a new one refused (503) when all are busy")
	f.IntVar(&o.maxSessionsClient, "max-sessions-per-client", gateway.DefaultMaxSessionsPerClient, "bound on the sessions of one client (a bearer token; without --auth-token-file every client is the same client); past it as --max-sessions, refused with 429")
	f.IntVar(&o.maxCallsInFlight, "max-calls-in-flight", gateway.DefaultMaxCallsInFlight, "bound on the tools/calls the gateway serves at once; one past it gets an MCP error at once")
	f.Int64Var(&o.maxBytesInFlight, "max-request-bytes-in-flight", gateway.DefaultMaxRequestBytesInFlight, "bound on the bytes of gateway request bodies held at once; a request past it is refused (503) at once")
	f.DurationVar(&o.streamWrite, "stream-write-timeout", gateway.DefaultStreamWriteTimeout, "bound on one write to a gateway session's stream; a client that does not read for that long loses the stream")
	// Limits on what servers send (docs/contract.md §5a).
	f.Int64Var(&o.maxMessageBytes, "max-message-bytes", connection.DefaultMaxMessageBytes, "bound on one message a server sends (a stdio frame, an HTTP response body, one SSE event); a server that sends more loses its session and is connected again. Also the bound on one list a server pages (tools, prompts, resources, templates), its pages together")
	// Limits on files (docs/contract.md §5a): status writes paced per file.
	f.DurationVar(&o.statusWriteInterval, "status-write-interval", statusfile.DefaultWriteInterval, "write each status file at most once per this interval, after a burst of 4 writes (a change put off is written when its turn comes; 0: on every change)")
	// Routing by ownership (docs/contract.md §5a): templates a URI is tried against.
	f.IntVar(&o.maxCatchAllTemplates, "max-catch-all-templates", gateway.DefaultMaxCatchAllTemplates, "the most resource templates that match URIs of any scheme one connection exposes; the others are not exposed and are reported in its connection's status")
	f.IntVar(&o.maxTemplatesPerPrefix, "max-templates-per-prefix", gateway.DefaultMaxTemplatesPerPrefix, "the most resource templates with one literal prefix (the text before the first {expression}) one connection exposes; the others are not exposed and are reported in its connection's status")
	// One owner per directory (docs/contract.md, "One owner per directory").
	f.DurationVar(&o.ownerWait, "owner-wait", defaultOwnerWait, "with --stdio on a directory another tether owns: how long the bridge waits for an owner (the next one, after the owner went) before it answers its client's waiting requests with an error and exits")
	// Clients (docs/contract.md §5): the legacy transport, opt-in.
	f.BoolVar(&o.sse, "sse", false, "also serve the legacy HTTP+SSE transport (protocol 2024-11-05) at /sse beside /mcp, for clients that speak only it; same token, Host/Origin checks and limits")
	// The sandbox of stdio servers whose manifests set none (docs/security.md).
	f.StringVar(&o.defaultSandbox, "default-sandbox", "", "a file holding the sandbox policy (spec.stdio.sandbox's fields) of every stdio server whose manifest sets none; \"\": none (Linux only)")
	// Container servers (docs/contract.md §1, spec.container).
	f.StringVar(&o.containerRuntime, "container-runtime", "auto", "the container runtime's command that runs spec.container servers: auto (docker if on PATH, else podman), docker, podman, or a path to either")
	// Limits on what clients send (docs/contract.md §5a): idle sessions.
	f.DurationVar(&o.sessionIdle, "session-idle-timeout", gateway.DefaultSessionTimeout, "close a gateway HTTP session idle that long (no request in flight; an open standalone stream does not count); its client initializes again. 0 keeps idle sessions (--max-sessions still closes the least recently used for a new one); otherwise at least 1s")
	// Limits on what clients send (docs/contract.md §5a): resource subscriptions.
	f.IntVar(&o.maxSubsPerSession, "max-subscriptions-per-session", gateway.DefaultMaxSubscriptionsPerSession, "bound on the resource URIs one gateway session holds subscriptions to at once; a subscribe past it gets an MCP error naming this flag")
	f.IntVar(&o.maxSubs, "max-subscriptions", gateway.DefaultMaxSubscriptions, "bound on the distinct resource URIs the gateway subscribes its servers to (each is server state, and a stream of tether's toward a 2026-07-28 server); a subscribe to a new URI past it gets an MCP error naming this flag")
	return cmd
}

// minSessionIdle is the shortest --session-idle-timeout: the gateway
// wakes when a session may be due, and a timeout of a nanosecond kept a
// core busy waking.
const minSessionIdle = time.Second

// sessionTimeout is --session-idle-timeout as gateway.Options reads it,
// where 0 means the default and a negative value never.
func sessionTimeout(d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return -1, nil
	case d < minSessionIdle:
		return 0, fmt.Errorf("--session-idle-timeout %v: must be 0 (idle sessions are kept) or at least %v", d, minSessionIdle)
	}
	return d, nil
}

// saveHoldBound bounds how long the start's new last valid specs wait for
// the first outcomes (docs/contract.md §3): long enough that 1,000
// connections start without 1,000 file creations in their way, short
// enough that a working connection's spec is soon kept.
const saveHoldBound = 5 * time.Second

// readDefaultSandbox reads --default-sandbox: nil when it names no file.
func readDefaultSandbox(file string) (*spec.SandboxSpec, error) {
	if file == "" {
		return nil, nil
	}
	data, _, err := boundedfile.Read(file, spec.MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("--default-sandbox: %w", err)
	}
	policy, err := spec.DecodeSandboxPolicy(file, data)
	if err != nil {
		return nil, fmt.Errorf("--default-sandbox: %w", err)
	}
	return policy, nil
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text or json", format)
}

func runController(ctx context.Context, o *runOptions, stderr io.Writer) error {
	log, err := newLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		return err
	}
	if err := o.checkMode(); err != nil {
		return err
	}
	defaultSandbox, err := readDefaultSandbox(o.defaultSandbox)
	if err != nil {
		return err
	}
	if !o.kubernetes {
		if fi, err := os.Stat(o.dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("--dir %s: not a directory", o.dir)
		}
	}
	var selector func(map[string]string) bool
	if o.selector != "" {
		sel, err := labels.Parse(o.selector)
		if err != nil {
			return fmt.Errorf("--selector: %w", err)
		}
		selector = func(l map[string]string) bool { return sel.Matches(labels.Set(l)) }
	}
	if o.workers < 1 {
		return errors.New("--workers must be at least 1")
	}
	if o.maxNameLength < 1 {
		return errors.New("--max-name-length must be at least 1")
	}
	if o.maxCatchAllTemplates < 1 {
		return errors.New("--max-catch-all-templates must be at least 1")
	}
	if o.maxTemplatesPerPrefix < 1 {
		return errors.New("--max-templates-per-prefix must be at least 1")
	}
	if o.maxMessageBytes < minMaxMessageBytes {
		return fmt.Errorf("--max-message-bytes must be at least %d (an MCP handshake does not fit in less)", minMaxMessageBytes)
	}
	if o.statusWriteInterval < 0 {
		return errors.New("--status-write-interval must not be negative")
	}

	if o.stdio && o.listen != "" && o.listenSet {
		return errors.New("--stdio and --listen exclude each other")
	}
	if o.sse && (o.stdio || o.listen == "") {
		return errors.New("--sse serves /sse beside /mcp on --listen: it needs --listen, and excludes --stdio")
	}
	origins, err := httpguard.ParseOrigins(o.allowedOrigins)
	if err != nil {
		return fmt.Errorf("--allowed-origins: %w", err)
	}
	if o.requestReadTimeout <= 0 || o.streamWrite <= 0 {
		return errors.New("--request-read-timeout and --stream-write-timeout must be positive")
	}
	if o.maxSessions < 1 || o.maxSessionsClient < 1 || o.maxCallsInFlight < 1 || o.maxBytesInFlight < 1 {
		return errors.New("--max-sessions, --max-sessions-per-client, --max-calls-in-flight and --max-request-bytes-in-flight must be at least 1")
	}
	if o.maxSubsPerSession < 1 || o.maxSubs < 1 {
		return errors.New("--max-subscriptions-per-session and --max-subscriptions must be at least 1")
	}
	if o.ownerWait <= 0 {
		return errors.New("--owner-wait must be positive")
	}
	sessionIdle, err := sessionTimeout(o.sessionIdle)
	if err != nil {
		return err
	}

	// SIGHUP stops tether as SIGTERM does (docs/contract.md §6): it comes
	// when the terminal tether runs in goes away, and there is nothing to
	// reload on it, since tether watches every file it reads. Left to its
	// default it killed tether with no final status (phase stayed Connected).
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	// One owner per directory (docs/contract.md): the lock on the state
	// directory decides, before anything is started or cleaned up there.
	stateDir, stateErr := openState(o, log)
	if stateDir != nil && !o.kubernetes {
		if o.takeover == nil {
			lock, err := owner.TryLock(stateDir.Path())
			if errors.Is(err, owner.ErrOwned) && !o.stdio && !ownerAnswers(ctx, stateDir.Path()) {
				// An owner that does not answer on its socket is dying (a
				// SIGKILLed tether releases the lock only once the kernel
				// has closed its files) or starting: the lock decides
				// within a short bound, not the first look.
				lock, err = waitDyingOwner(ctx, stateDir.Path(), log)
				if ctx.Err() != nil {
					// Stopped (SIGTERM, SIGINT) while it waited: nothing was
					// started, so nothing is stopped, and nobody was refused.
					if lock != nil {
						_ = lock.Release()
					}
					stateDir.Close()
					return nil
				}
			}
			if errors.Is(err, owner.ErrOwned) {
				stateDir.Close()
				if o.stdio {
					return runStdioBridge(ctx, o, log, stderr)
				}
				return ownedElsewhere(ctx, o, stateDir.Path(), stderr)
			}
			if err != nil {
				stateDir.Close()
				return err
			}
			defer lock.Release()
		}
	}
	cleanState(stateDir, log)

	// The gateway's and the metrics' listeners are bound before anything
	// starts: an address in use ends the run before a server is started, a
	// status written or the owner record made, and no status says Connected
	// (nor /readyz ready) while the gateway does not accept yet.
	var gatewayLn, metricsLn net.Listener
	servesTCP := o.takeover == nil && !o.stdio && o.listen != ""
	if servesTCP {
		if gatewayLn, err = gateway.Listen(ctx, o.listen, o.authTokenFile); err != nil {
			return fmt.Errorf("--listen %s: %w", o.listen, err)
		}
		defer gatewayLn.Close()
	}
	if o.metricsAddr != "" {
		metricsLn, err = metrics.Listen(ctx, o.metricsAddr)
		switch {
		case err != nil && o.stdio && !o.metricsSet && addrInUse(err):
			// A client launches a stdio tether per directory: the owner
			// of another directory holds the default port. That must not
			// end this client's gateway (docs/contract.md §4).
			log.Warn("metrics off: the default --metrics-addr is in use (another tether's?); set --metrics-addr to serve them", "addr", o.metricsAddr, "err", err)
			metricsLn = nil
		case err != nil:
			return fmt.Errorf("--metrics-addr %s: %w", o.metricsAddr, err)
		default:
			defer metricsLn.Close()
		}
	}

	// Tracing is on only when OTEL_* variables ask for it; then log lines
	// about traced operations carry trace_id and span_id.
	tel, err := tracing.Setup(ctx, version, log)
	if err != nil {
		return err
	}
	log = tel.Logger(log)
	maxConns, err := connectionLimit(o.maxConnections, log)
	if err != nil {
		return err
	}

	m := metrics.New(version)
	var ctrl *controller.Controller
	// Closed when the controller's FirstOutcomes is: a gateway client's
	// first list waits for it (docs/contract.md §5).
	firstOutcomes, savesDue := make(chan struct{}), make(chan struct{})
	gw := gateway.New(gateway.Options{
		Logger:      log,
		ObserveCall: m.ObserveCall,
		// Collisions change other connections' status: look at all again.
		OnCollisionsChanged: func() {
			if ctrl != nil {
				ctrl.EnqueueAll()
			}
		},
		// A request for a connection that is not connected brings it back
		// at once (reconnect on use; an OnDemand server's start).
		Wake: func(ctx context.Context, name string) error {
			if ctrl == nil {
				return errors.New("tether is starting")
			}
			return ctrl.Wake(ctx, name)
		},
		SSE:                   o.sse,
		FirstAnswer:           firstOutcomes,
		FirstAnswerTimeout:    o.connect,
		Version:               version,
		MaxNameLength:         o.maxNameLength,
		MaxCatchAllTemplates:  o.maxCatchAllTemplates,
		MaxTemplatesPerPrefix: o.maxTemplatesPerPrefix,
		// Limits on what clients send.
		RequestReadTimeout:      o.requestReadTimeout,
		MaxConnections:          maxConns,
		AllowedOrigins:          origins,
		MaxSessions:             o.maxSessions,
		MaxSessionsPerClient:    o.maxSessionsClient,
		MaxCallsInFlight:        o.maxCallsInFlight,
		MaxRequestBytesInFlight: o.maxBytesInFlight,
		StreamWriteTimeout:      o.streamWrite,
		SessionTimeout:          sessionIdle,
		// Resource subscriptions.
		MaxSubscriptionsPerSession: o.maxSubsPerSession,
		MaxSubscriptions:           o.maxSubs,
	})
	var ledger *connection.GroupLedger
	var lastValid manifest.LastValidStore
	var catalogs controller.CatalogStore
	var tokens *oauth.Store
	var sandboxTemp, statePath string
	if stateDir != nil {
		statePath = stateDir.Path()
		lastValid, catalogs = stateDir, stateDir
		tokens = oauth.NewStore(stateDir.Path())
		// Before any child starts: what a tether killed with SIGKILL left.
		ledger = connection.NewGroupLedger(stateDir.Files("groups"), log)
		if stopped := ledger.StopLeftovers(5 * time.Second); len(stopped) > 0 {
			log.Warn("stopped process groups a previous tether left running", "groups", len(stopped))
		}
		// The sandboxed servers' TMPDIRs, emptied of what such a tether left.
		sandboxTemp = filepath.Join(stateDir.Path(), "sandbox-tmp")
		if err := connection.PrepareSandboxTemp(sandboxTemp); err != nil {
			log.Warn("sandboxed servers get their TMPDIR in the system's temporary directory", "err", err)
			sandboxTemp = ""
		}
	}
	containers, err := containerRuntime(o, stateDir, log)
	if err != nil {
		return err
	}
	// What every session shares (handshake gates, protocol-version memory,
	// the HTTP connection pool, tool definitions, the ledger, the sandbox
	// defaults, the container runtime): one value, made once, in either mode.
	var manifestRoot string
	// The manifest source, once made: a connect takes the directories of
	// its last listing (ManifestDirs) rather than list the tree again.
	var fileSource *manifest.Source
	if !o.kubernetes {
		manifestRoot = absPath(o.dir)
	}
	connector := connection.NewConnector(connection.ConnectorOptions{Ledger: ledger, DefaultSandbox: defaultSandbox, DefaultSandboxFile: o.defaultSandbox, SandboxTemp: sandboxTemp, StateDir: statePath, Containers: containers,
		ManifestRoot: manifestRoot, ManifestDirs: func() []string { return fileSource.Dirs() }})
	defer connector.Close()
	subreaper := true
	if err := connection.BecomeSubreaper(); err != nil {
		subreaper = false
		log.Warn("cannot become a child subreaper: orphaned grandchildren go to init", "err", err)
	}
	store := desired.NewStore()
	var (
		source  controller.Source
		status  controller.StatusSink
		secrets func(string) connection.SecretReader
		kube    *kubernetes.Mode
		files   *statusfile.Writer
	)
	if o.kubernetes {
		if kube, err = newKubernetesMode(o, store, log, m); err != nil {
			return err
		}
		defer kube.Close()
		source, status, secrets = kube.Source, kube.Status, kube.Source.SecretsFor
	} else {
		files = statusfile.NewWriter(o.dir, o.statusDir, store.At)
		files.SetWriteInterval(o.statusWriteInterval)
		files.SetWriteBurst(statusfile.DefaultWriteBurst)
		status = files
		// Before the first status write: what a tether killed while it
		// wrote one left behind.
		removed, err := files.RemoveTemporaries()
		if len(removed) > 0 {
			log.Info("removed temporary status files a previous tether left", "files", removed)
		}
		if err != nil {
			log.Warn("looking for temporary status files a previous tether left", "err", err)
		}
		fileSource = manifest.NewSource(manifest.SourceOptions{
			Root:        o.dir,
			Logger:      log,
			Resync:      o.resync,
			Selector:    selector,
			LastValid:   lastValid,
			NoLastValid: refusedState(stateErr),
			// The connections start first; their last valid specs are
			// saved once each has its first outcome.
			SaveAfter:      savesDue,
			ManifestErrors: m.SetManifestErrors,
			// A document whose name another file declares gets an Invalid
			// status document that says so.
			OnRejected: func(byFile map[string][]manifest.Rejected) {
				if err := files.SetRejected(byFile, time.Now()); err != nil {
					log.Warn("writing the status of rejected manifest documents", "err", err)
				}
			},
			// Before the first status write: the status files of manifests
			// removed while tether was not running.
			OnSynced: func(found map[string]bool) {
				removed, err := files.Prune(found)
				for _, f := range removed {
					log.Info("removed the status file of a manifest that is gone", "file", f)
				}
				if err != nil {
					log.Warn("looking for status files of removed manifests", "err", err)
				}
			},
		}, store)
		source = fileSource
	}
	ctrl = controller.New(controller.Options{
		Desired:         store,
		Source:          source,
		Status:          status,
		Workers:         o.workers,
		Connector:       controller.SDKConnector{Connector: connector, Version: version, Secrets: secrets, Tokens: tokens, MaxMessageBytes: o.maxMessageBytes},
		Catalogs:        catalogs,
		Exposer:         controller.GatewayExposer{G: gw},
		Metrics:         m,
		QueueMetrics:    m.QueueProvider(),
		Logger:          log,
		ShutdownTimeout: o.shutdown,
		ConnectTimeout:  o.connect,
	})

	go func() {
		<-ctrl.FirstOutcomes()
		close(firstOutcomes)
	}()
	// The start's new specs are saved once the first outcomes are in, or
	// after saveHoldBound when one server is slow to have one: a working
	// connection's spec is not left unsaved for --connect-timeout.
	go func() {
		select {
		case <-firstOutcomes:
		case <-time.After(saveHoldBound):
		case <-ctx.Done():
		}
		close(savesDue)
	}()

	// The servers run beside the controller; one that fails ends the run.
	var servers sync.WaitGroup
	serve := func(what string, f func(context.Context) error) {
		servers.Add(1)
		go func() {
			defer servers.Done()
			// The client closing stdin stops the run as any stdio MCP
			// server stops (ownClientGone).
			if err := f(ctx); err != nil {
				cancel(fmt.Errorf("%s: %w", what, err))
			}
		}()
	}
	// The control socket: the owner's API and the gateway, for bridges
	// and tether get (docs/contract.md, "The control socket").
	var ctl *owner.Server
	if stateDir != nil && !o.kubernetes {
		var gatewayAddr *net.TCPAddr
		if gatewayLn != nil {
			gatewayAddr, _ = gatewayLn.Addr().(*net.TCPAddr)
		}
		if ctl, err = serveControl(ctx, o, stateDir.Path(), gw, gatewayAddr, ctrl, log, serve); err != nil {
			return err
		}
	}
	// The client this run serves itself went away: the run ends, handing
	// the directory over when bridges that take over are attached, so that
	// no status says "tether stopped" while one of them carries on.
	ownClientGone := func() {
		if ctl != nil && ctl.Attached() > 0 {
			log.Info("the client went away while bridges are attached: handing the directory over to one of them", "bridges", ctl.Attached())
			ctrl.HandOver()
		}
		cancel(nil)
	}
	switch {
	case o.takeover != nil:
		serve("own client", func(ctx context.Context) error {
			select {
			case <-o.takeover.clientGone:
				if ctx.Err() == nil {
					ownClientGone()
				}
			case <-ctx.Done():
			}
			return nil
		})
	case o.stdio:
		serve("gateway (stdio)", func(ctx context.Context) error {
			err := gw.ServeStdio(ctx)
			if err == nil && ctx.Err() == nil {
				ownClientGone()
			}
			return err
		})
	case servesTCP:
		serve("gateway", func(ctx context.Context) error { return gw.ServeListener(ctx, gatewayLn, o.authTokenFile) })
	}
	if kube != nil {
		serve("leader election", func(ctx context.Context) error { return kube.Run(ctx, ctrl.EnqueueAll) })
	}
	if tokens != nil {
		// A connection waiting for `tether login` resumes once it stored
		// tokens. Without the watch it would wait for a restart: say so,
		// but run on.
		serve("OAuth token watch", func(ctx context.Context) error {
			if err := tokens.Watch(ctx, log, ctrl.RetryNow); err != nil {
				log.Warn("not watching the OAuth token files: after tether login, restart tether run", "err", err)
			}
			return nil
		})
	}
	if containers != nil && containers.Owner != "" {
		// Beside the start, not before it: a runtime whose daemon does not
		// answer must not hold tether up. Containers started meanwhile are
		// this tether's and are left alone.
		serve("leftover containers", func(ctx context.Context) error {
			if removed := connection.RemoveLeftoverContainers(ctx, containers, log); len(removed) > 0 {
				log.Warn("removed containers a previous tether left running", "containers", removed)
			}
			return nil
		})
	}
	if ledger != nil {
		// The groups recorded can gain members while this tether runs:
		// its heartbeat bounds them for the next start's StopLeftovers.
		serve("process-group ledger", func(ctx context.Context) error { ledger.Heartbeat(ctx); return nil })
	}
	if subreaper {
		// Orphans re-parented to tether exit while their server runs.
		serve("orphan reaper", func(ctx context.Context) error { connection.ReapOrphans(ctx); return nil })
	}
	if metricsLn != nil {
		serve("metrics", func(ctx context.Context) error {
			return metrics.ServeListener(ctx, metricsLn, m.Handler(ctrl.Ready, origins))
		})
	}

	log.Info("tether starting", "version", version, "desired", o.desiredDesc(), "gateway", gatewayDesc(o, gatewayLn), "metrics", metricsDesc(metricsLn))
	err = ctrl.Run(ctx)
	if files != nil {
		// The final status, put off by the write interval, goes now.
		if cerr := files.Close(); cerr != nil {
			log.Warn("writing the final status", "err", cerr)
		}
	}
	cancel(nil)
	servers.Wait()
	// The gateway's own goroutines (evictions, subscription renewals)
	// end once the backends are closed.
	gw.Close()
	// Export what the final reconciles recorded; a collector that is gone
	// must not hold the exit up for long.
	tctx, tcancel := context.WithTimeout(context.Background(), 5*time.Second)
	if terr := tel.Shutdown(tctx); terr != nil {
		log.Warn("tracing: not every span was exported", "err", terr)
	}
	tcancel()
	if cause := context.Cause(ctx); err == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	log.Info("tether stopped")
	return err
}

// containerRuntime resolves --container-runtime. With auto and no runtime
// on PATH there is none (a container server's connect says so); a runtime
// named and not found is an error. Its containers' directories go in the
// state directory (containers/), else in temporary directories.
func containerRuntime(o *runOptions, stateDir *state.Dir, log *slog.Logger) (*connection.ContainerRuntime, error) {
	var dir, owner string
	if stateDir != nil {
		// Absolute: the runtime's daemon resolves mount sources, not
		// tether, and from its own working directory.
		abs, err := filepath.Abs(stateDir.Path())
		if err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
		owner = abs
		dir = filepath.Join(abs, "containers")
	}
	rt, err := connection.FindContainerRuntime(o.containerRuntime, dir, owner)
	if err != nil {
		if o.containerRuntime == "auto" {
			log.Debug("no container runtime: container servers cannot run", "err", err)
			return nil, nil
		}
		return nil, err
	}
	if rt.InitProblem != "" {
		log.Debug("container servers cannot have env", "reason", rt.InitProblem)
	}
	return rt, nil
}

// openState opens the state directory. tether runs without one when it
// cannot be used, and says so: what it keeps there is a help, not a need
// (but OAuth logins need it).
func openState(o *runOptions, log *slog.Logger) (*state.Dir, error) {
	path := stateDirPath(o.stateDir, o.statusDir, o.dir)
	if o.stateDir == "" && o.kubernetes {
		// No directory to put it under, and a pod's root filesystem is
		// read-only: the objects keep what a cluster needs.
		return nil, nil
	}
	d, err := state.Open(path, o.maxStateFile)
	if err != nil {
		log.Warn("running without a state directory: last valid specs, servers' catalogs and children's process groups are not kept across restarts (OnDemand servers start at start-up), OAuth logins cannot be used, and nothing keeps a second tether off the directory", "err", err)
		return nil, err
	}
	return d, nil
}

// cleanState removes, before anything writes in the state directory, what
// a tether killed while it wrote left behind. Only its owner may.
func cleanState(d *state.Dir, log *slog.Logger) {
	if d == nil {
		return
	}
	removed, err := d.RemoveTemporaries()
	if len(removed) > 0 {
		log.Info("removed temporary files a previous tether left in the state directory", "files", removed)
	}
	if err != nil {
		log.Warn("looking for temporary files a previous tether left in the state directory", "err", err)
	}
}

// refusedState is why no last valid spec is kept when the state directory
// was refused as not tether's alone (its error says so), for the status of
// the connections it would have kept; "" otherwise.
func refusedState(err error) string {
	if errors.Is(err, state.ErrRefused) {
		return err.Error()
	}
	return ""
}

// stateDirPath is --state-dir, by default .tether under --status-dir, else
// under --dir (tether login finds it the same way).
func stateDirPath(stateDir, statusDir, dir string) string {
	if stateDir != "" {
		return stateDir
	}
	return filepath.Join(cmp.Or(statusDir, dir), state.DirName)
}

// gatewayDesc is the gateway as the start line names it: the URL of the
// address ln is bound to (gatewayURL, as the owner record names it), not
// the flag's text.
func gatewayDesc(o *runOptions, ln net.Listener) string {
	if o.stdio {
		return "stdio"
	}
	if ln == nil {
		return "off"
	}
	tcp, ok := ln.Addr().(*net.TCPAddr)
	if !ok { // a gateway listener is TCP
		return "http://" + ln.Addr().String() + gateway.Path
	}
	if o.sse {
		return gatewayURL(tcp) + " and " + gateway.SSEPath
	}
	return gatewayURL(tcp)
}

// metricsDesc is the metrics' address as the start line names it: "off"
// when none is served (--metrics-addr empty, or a --stdio run's default
// port in use).
func metricsDesc(ln net.Listener) string {
	if ln == nil {
		return "off"
	}
	return ln.Addr().String()
}

// connectionLimit is --max-connections, lowered to half the process's
// descriptor limit: the rest stays for tether's own work (stdio pipes,
// status and state files, backend connections), which a flood of clients
// must never starve.
func connectionLimit(flag int, log *slog.Logger) (int, error) {
	if flag < 1 {
		return 0, errors.New("--max-connections must be at least 1")
	}
	if cur, ok := descriptorLimit(); ok && cur > 0 && cur/2 < uint64(flag) {
		half := max(int(cur/2), 1)
		log.Info("--max-connections lowered to half the descriptor limit", "flag", flag, "limit", half, "descriptors", cur)
		return half, nil
	}
	return flag, nil
}
