package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/tether-mcp/tether/controller/desired"
)

// ModeOptions configures Kubernetes mode.
type ModeOptions struct {
	Config *ClientConfig
	// Namespace is the namespace watched; "" watches all of them.
	Namespace     string
	LabelSelector string
	Resync        time.Duration
	// LeaderElection, when set, elects the replica that writes status;
	// without it this replica always writes.
	LeaderElection *LeaderElectionOptions
	Logger         *slog.Logger
	ManifestErrors func(object string, n int)
}

// LeaderElectionOptions configures the election (see Elector).
type LeaderElectionOptions struct {
	// LeaseNamespace and LeaseName name the Lease.
	LeaseNamespace, LeaseName                 string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Mode is Kubernetes mode put together: the informer Source, the status
// writer, the Events it records and, optionally, the leader election.
type Mode struct {
	Source *Source
	Status *StatusWriter

	log      *slog.Logger
	elector  *Elector
	events   *Recorder
	identity string
}

// NewMode builds Kubernetes mode's parts on store; nothing runs until Run.
func NewMode(store *desired.Store, opts ModeOptions) (*Mode, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	dyn, err := dynamic.NewForConfig(opts.Config.Rest)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	m := &Mode{log: opts.Logger, identity: Identity()}
	m.Source = NewSource(SourceOptions{
		Client:         dyn,
		Namespace:      opts.Namespace,
		LabelSelector:  opts.LabelSelector,
		Resync:         opts.Resync,
		Logger:         opts.Logger,
		ManifestErrors: opts.ManifestErrors,
	}, store)

	// Events are deduplicated, aggregated and rate-limited per object by
	// the Recorder's correlation, on top of the few transitions the writer
	// records. Everything goes through the dynamic client: a typed client
	// would link the scheme of every API group (see Recorder).
	m.events = NewRecorder(RecorderOptions{Client: dyn, Component: "tether", Host: m.identity, Logger: opts.Logger})

	leading := func() bool { return true }
	if le := opts.LeaderElection; le != nil {
		m.elector = NewElector(ElectorOptions{
			Client:        dyn,
			Namespace:     le.LeaseNamespace,
			Name:          le.LeaseName,
			Identity:      m.identity,
			LeaseDuration: le.LeaseDuration,
			RenewDeadline: le.RenewDeadline,
			RetryPeriod:   le.RetryPeriod,
			Logger:        opts.Logger,
		})
		leading = m.elector.Leading
	}
	m.Status = NewStatusWriter(StatusOptions{
		Client:  dyn,
		Objects: m.Source.Object,
		Leading: leading,
		Events:  m.events,
		Logger:  opts.Logger,
	})
	return m, nil
}

// Identity is this replica's name in the Lease and in its Events' source.
func (m *Mode) Identity() string { return m.identity }

// Run takes part in the leader election, if there is one, until ctx is done.
// reconcileAll asks the controller to reconcile every connection: a new
// leader writes every status that is not what it sees.
func (m *Mode) Run(ctx context.Context, reconcileAll func()) error {
	if m.elector == nil {
		<-ctx.Done()
		return nil
	}
	m.elector.opts.OnStartedLeading = func() {
		m.Status.Forget()
		reconcileAll()
	}
	return m.elector.Run(ctx)
}

// Close stops recording Events (after the final statuses were written),
// letting those queued be written for a few seconds.
func (m *Mode) Close() { m.events.Close() }
