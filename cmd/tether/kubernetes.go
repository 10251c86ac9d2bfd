package main

import (
	"errors"
	"fmt"
	"log/slog"

	"k8s.io/klog/v2"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/kubernetes"
	"github.com/tether-mcp/tether/controller/metrics"
)

// checkMode checks that the flags name one source of desired state and only
// the options that go with it.
func (o *runOptions) checkMode() error {
	if !o.kubernetes {
		if o.dir == "" {
			return errors.New(`required flag "dir" not set (or --kubernetes to watch a cluster)`)
		}
		for _, f := range []struct {
			set  bool
			name string
		}{
			{o.namespace != "", "--namespace"}, {o.allNamespaces, "--all-namespaces"},
			{o.kubeconfig != "", "--kubeconfig"}, {o.leaderElect, "--leader-elect"},
		} {
			if f.set {
				return fmt.Errorf("%s needs --kubernetes", f.name)
			}
		}
		return nil
	}
	switch {
	case o.dir != "":
		return errors.New("--dir and --kubernetes exclude each other: the desired state comes from files or from a cluster")
	case o.statusDir != "":
		return errors.New("--status-dir does not apply with --kubernetes: status goes to each object's status subresource")
	case o.namespace != "" && o.allNamespaces:
		return errors.New("--namespace and --all-namespaces exclude each other")
	}
	return nil
}

// desiredDesc says where the desired state comes from, for the start line.
func (o *runOptions) desiredDesc() string {
	if !o.kubernetes {
		return o.dir
	}
	return "kubernetes"
}

// newKubernetesMode connects Kubernetes mode's parts: the client
// configuration, the informer, the status writer and the leader election.
func newKubernetesMode(o *runOptions, store *desired.Store, log *slog.Logger, m *metrics.Metrics) (*kubernetes.Mode, error) {
	// client-go's own logs (a watch that failed, a list retried) go where
	// tether's go, in its format.
	klog.SetSlogLogger(log.With("component", "client-go"))
	cc, err := kubernetes.LoadClientConfig(o.kubeconfig, "tether/"+version)
	if err != nil {
		return nil, err
	}
	watched := o.namespace
	if watched == "" && !o.allNamespaces {
		watched = cc.Namespace
	}
	opts := kubernetes.ModeOptions{
		Config:         cc,
		Namespace:      watched,
		LabelSelector:  o.selector,
		Resync:         o.resync,
		Logger:         log,
		ManifestErrors: m.SetManifestErrors,
	}
	if o.leaderElect {
		le := o.lease
		le.LeaseNamespace = watched
		if le.LeaseNamespace == "" {
			le.LeaseNamespace = cc.Namespace
		}
		opts.LeaderElection = &le
	}
	mode, err := kubernetes.NewMode(store, opts)
	if err != nil {
		return nil, err
	}
	ns := watched
	if ns == "" {
		ns = "(all)"
	}
	log.Info("kubernetes mode", "host", cc.Rest.Host, "namespace", ns, "leaderElect", o.leaderElect, "identity", mode.Identity())
	return mode, nil
}
