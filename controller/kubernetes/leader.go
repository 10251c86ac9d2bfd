package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Default timings of the leader election, client-go's own defaults: a
// replica that dies unannounced is replaced within LeaseDuration (+ one
// RetryPeriod); one that stops gracefully releases the Lease at once.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// ElectorOptions configures an Elector.
type ElectorOptions struct {
	Client coordinationv1client.LeasesGetter
	// Namespace and Name of the Lease.
	Namespace, Name string
	// Identity names this replica in the Lease (default: Identity()).
	Identity                                  string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnStartedLeading runs when this replica becomes the leader, once
	// Leading reports true: the status writer forgets what it wrote and the
	// controller reconciles everything, so the new leader writes every
	// status that is not what it sees.
	OnStartedLeading func()
	Logger           *slog.Logger
}

// Elector runs leader election on a coordination.k8s.io Lease: every replica
// serves the gateway, the leader alone writes status. It stands again after
// losing the Lease (an API server away longer than the renew deadline), as
// a replica that keeps serving must.
type Elector struct {
	opts    ElectorOptions
	log     *slog.Logger
	leading atomic.Bool
	ctxDone atomic.Bool
}

// NewElector returns an elector; Run takes part in the election.
func NewElector(opts ElectorOptions) *Elector {
	if opts.Identity == "" {
		opts.Identity = Identity()
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.RenewDeadline <= 0 {
		opts.RenewDeadline = DefaultRenewDeadline
	}
	if opts.RetryPeriod <= 0 {
		opts.RetryPeriod = DefaultRetryPeriod
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.OnStartedLeading == nil {
		opts.OnStartedLeading = func() {}
	}
	return &Elector{opts: opts, log: opts.Logger.With("lease", opts.Namespace+"/"+opts.Name, "identity", opts.Identity)}
}

// Identity is this replica's name in the Lease: the host name (a pod's
// name) and a random suffix, so that a restarted replica is a new holder.
func Identity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "tether"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}

// Leading reports whether this replica holds the Lease. It turns false as
// soon as ctx of Run ends, before the Lease is released: the statuses a
// stopping replica would write (Stopped) are not the truth of a cluster
// where other replicas serve.
func (l *Elector) Leading() bool { return l.leading.Load() && !l.ctxDone.Load() }

// Run takes part in the election until ctx is done, then releases the Lease
// if it holds it.
func (l *Elector) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { l.ctxDone.Store(true) })
	defer stop()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: l.opts.Namespace, Name: l.opts.Name},
		Client:     l.opts.Client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: l.opts.Identity},
	}
	cfg := leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            l.opts.Name,
		LeaseDuration:   l.opts.LeaseDuration,
		RenewDeadline:   l.opts.RenewDeadline,
		RetryPeriod:     l.opts.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				l.leading.Store(true)
				l.log.Info("leading: this replica writes status")
				l.opts.OnStartedLeading()
			},
			OnStoppedLeading: func() {
				if l.leading.Swap(false) {
					l.log.Info("no longer leading: another replica writes status")
				}
			},
			OnNewLeader: func(id string) {
				if id != l.opts.Identity {
					l.log.Info("another replica leads", "leader", id)
				}
			},
		},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(cfg)
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(ctx) // returns when ctx ends or the Lease is lost
	}
	return nil
}
