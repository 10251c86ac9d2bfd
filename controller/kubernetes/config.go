package kubernetes

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ClientConfig is how tether reaches the API server, and the namespace it
// runs in (the default of --namespace, and where the Lease lives).
type ClientConfig struct {
	Rest      *rest.Config
	Namespace string
}

// LoadClientConfig returns the client configuration: the kubeconfig file
// when one is named; else the pod's service account when tether runs in a
// cluster; else the kubeconfig that kubectl would use ($KUBECONFIG,
// ~/.kube/config). The namespace is the pod's, or the kubeconfig context's
// ("default" when it names none).
func LoadClientConfig(kubeconfig, userAgent string) (*ClientConfig, error) {
	var cc *ClientConfig
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		switch {
		case err == nil:
			ns := "default"
			if b, err := os.ReadFile(serviceAccountNamespace); err == nil && len(strings.TrimSpace(string(b))) > 0 {
				ns = strings.TrimSpace(string(b))
			}
			cc = &ClientConfig{Rest: cfg, Namespace: ns}
		case !errors.Is(err, rest.ErrNotInCluster):
			return nil, fmt.Errorf("in-cluster configuration: %w", err)
		}
	}
	if cc == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = kubeconfig
		loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
		cfg, err := loader.ClientConfig()
		if err != nil {
			if kubeconfig == "" {
				return nil, fmt.Errorf("not running in a cluster and no kubeconfig found (pass --kubeconfig): %w", err)
			}
			return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
		}
		ns, _, err := loader.Namespace()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig namespace: %w", err)
		}
		cc = &ClientConfig{Rest: cfg, Namespace: ns}
	}
	cc.Rest = rest.CopyConfig(cc.Rest)
	cc.Rest.UserAgent = userAgent
	// client-go's default (5 QPS, burst 10) would take minutes to write the
	// statuses of a thousand connections after a leader change.
	if cc.Rest.QPS == 0 {
		cc.Rest.QPS, cc.Rest.Burst = 50, 100
	}
	return cc, nil
}
