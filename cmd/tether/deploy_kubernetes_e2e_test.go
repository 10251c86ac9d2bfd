//go:build unix

package main

// The kustomize base (examples/kubernetes) and the Helm chart
// (examples/helm/tether) applied to the real kube-apiserver of the test
// control plane: every object they declare is created, with the CRD that
// `tether crd` prints. docs/deploy.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/tether-mcp/tether/controller/kubernetes/kubetest"
)

// object is what names a Kubernetes object in a manifest.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func (o object) String() string {
	if o.Metadata.Namespace == "" {
		return o.Kind + "/" + o.Metadata.Name
	}
	return o.Kind + "/" + o.Metadata.Namespace + "/" + o.Metadata.Name
}

// documents splits a multi-document YAML stream into its non-empty
// documents.
func documents(stream string) []string {
	var docs []string
	for _, d := range strings.Split("\n"+stream, "\n---") {
		d = strings.TrimPrefix(d, "\n")
		if strings.TrimSpace(stripComments(d)) != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

// stripComments drops the lines that are only a comment.
func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// objects decodes what each document of a manifest stream names.
func objects(t *testing.T, stream string) []object {
	t.Helper()
	var objs []object
	for _, d := range documents(stream) {
		var o object
		if err := yaml.Unmarshal([]byte(d), &o); err != nil {
			t.Fatalf("a document is not a Kubernetes object: %v\n%s", err, d)
		}
		if o.Kind == "" || o.Metadata.Name == "" {
			t.Fatalf("a document has no kind or name:\n%s", d)
		}
		objs = append(objs, o)
	}
	return objs
}

// kinds is the sorted kinds of objs, one entry per object.
func kinds(objs []object) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.Kind)
	}
	sort.Strings(ks)
	return ks
}

// requireObjects reads each object back from the apiserver.
func requireObjects(t *testing.T, cp *kubetest.ControlPlane, objs []object) {
	t.Helper()
	for _, o := range objs {
		group := ""
		if g, _, ok := strings.Cut(o.APIVersion, "/"); ok {
			group = g
		}
		resource := strings.ToLower(o.Kind)
		if group != "" {
			resource += "." + group
		}
		args := []string{"get", resource, o.Metadata.Name, "-o", "name"}
		if o.Metadata.Namespace != "" {
			args = append(args, "-n", o.Metadata.Namespace)
		}
		if got := strings.TrimSpace(cp.Kubectl(t, args...)); got == "" {
			t.Errorf("%s: kubectl get printed nothing", o)
		}
	}
}

// generatedCRD is `tether crd`'s output, decoded.
func generatedCRD(t *testing.T) map[string]any {
	t.Helper()
	var crd map[string]any
	if err := yaml.Unmarshal(runCommand(t, "crd"), &crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// TestKustomizeBase applies examples/kubernetes with `kubectl apply -k` and
// reads back every object: Namespace, CRD (the one `tether crd` prints),
// RBAC, Deployment (of the image `make image` builds), Service and
// PodDisruptionBudget.
func TestKustomizeBase(t *testing.T) {
	base := filepath.Join(repoRoot(t), "examples", "kubernetes")
	dependsOn(t, base)
	cp := kubetest.Start(t)

	built := cp.Kubectl(t, "kustomize", base)
	objs := objects(t, built)
	want := []string{"CustomResourceDefinition", "Deployment", "Namespace", "PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount"}
	if got := kinds(objs); !slices.Equal(got, want) {
		t.Fatalf("the base declares %v, want %v", got, want)
	}
	for _, d := range documents(built) {
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(d), &doc); err != nil {
			t.Fatal(err)
		}
		switch doc["kind"] {
		case "CustomResourceDefinition":
			if !reflect.DeepEqual(doc, generatedCRD(t)) {
				t.Errorf("the base's CRD is not what `tether crd` prints:\n%s", d)
			}
		case "Deployment":
			if !strings.Contains(d, "image: tether:dev\n") {
				t.Errorf("the base's Deployment does not run tether:dev, the image `make image` builds:\n%s", d)
			}
		}
	}

	out := cp.Kubectl(t, "apply", "-k", base)
	for _, o := range objs {
		if !strings.Contains(out, "/"+o.Metadata.Name+" created") {
			t.Errorf("kubectl apply -k did not create %s:\n%s", o, out)
		}
	}
	requireObjects(t, cp, objs)
	cp.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/mcpconnections.tether.dev")
	// The CRD serves: an McpConnection of examples/ is accepted in the
	// base's namespace.
	cp.Kubectl(t, "apply", "-n", "mcp", "-f", filepath.Join(base, "connections", "demo.yaml"))
}

// helmBinary is the helm that hack/install-helm.sh builds; the test skips
// without it (fails under CI=true).
func helmBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), "_output", "helm", "bin", "helm")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("helm is not built (hack/install-peers.sh runs hack/install-helm.sh): %v", err)
		}
		t.Skipf("helm is not built (run hack/install-helm.sh)")
	}
	return p
}

// helmRunner runs helm against a control plane, with a home of its own: no
// discovery cache, repository or registry configuration of the user's, and
// none kept from one call to the next (a stale discovery cache would hide
// an API installed since).
type helmRunner struct {
	bin string
	cp  *kubetest.ControlPlane
}

func (h helmRunner) command(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, args...)
	cmd.Env = append(os.Environ(),
		"HOME="+home,
		"XDG_CACHE_HOME="+filepath.Join(home, "cache"),
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_DATA_HOME="+filepath.Join(home, "data"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache", "helm"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config", "helm"),
		"HELM_DATA_HOME="+filepath.Join(home, "data", "helm"),
	)
	if h.cp != nil {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+h.cp.Kubeconfig)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.String(), nil
}

func (h helmRunner) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := h.command(t, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHelmChart lints the chart, applies what `helm template` renders with a
// server-side dry run, and installs it twice on the real apiserver: without
// the Prometheus Operator's CRDs (no ServiceMonitor or PrometheusRule is
// rendered) and with them (both are, and are created). Every object of each
// release is read back.
func TestHelmChart(t *testing.T) {
	bin := helmBinary(t)
	chart := filepath.Join(repoRoot(t), "examples", "helm", "tether")
	dependsOn(t, chart, filepath.Join(repoRoot(t), "examples", "prometheus", "tether-alerts.yaml"), filepath.Join(repoRoot(t), "examples", "kubernetes", "crd.yaml"))
	alone := helmRunner{bin: bin}

	alone.run(t, "lint", "--strict", chart)

	// The chart's CRD is the one `tether crd` prints, read through Helm's
	// own chart loader.
	crds := alone.run(t, "show", "crds", chart)
	var crd map[string]any
	if err := yaml.Unmarshal([]byte(crds), &crd); err != nil {
		t.Fatalf("helm show crds: %v\n%s", err, crds)
	}
	if !reflect.DeepEqual(crd, generatedCRD(t)) {
		t.Errorf("the chart's CRD is not what `tether crd` prints:\n%s", crds)
	}

	cp := kubetest.Start(t)
	h := helmRunner{bin: bin, cp: cp}
	baseKinds := []string{"Deployment", "PodDisruptionBudget", "Role", "Role", "RoleBinding", "RoleBinding", "Secret", "Service", "ServiceAccount"}

	t.Run("template applies with a server-side dry run", func(t *testing.T) {
		cp.Kubectl(t, "create", "namespace", "dry")
		cp.Kubectl(t, "apply", "-f", filepath.Join(repoRoot(t), "examples", "kubernetes", "crd.yaml"))
		rendered := h.run(t, "template", "tether", chart, "--namespace", "dry")
		if got := kinds(objects(t, rendered)); !slices.Equal(got, baseKinds) {
			t.Errorf("helm template rendered %v, want %v", got, baseKinds)
		}
		out := kubectlStdin(t, cp, rendered, "apply", "--dry-run=server", "-n", "dry", "-f", "-")
		if n := strings.Count(out, "(server dry run)"); n != len(baseKinds) {
			t.Errorf("the server accepted %d objects in its dry run, want %d:\n%s", n, len(baseKinds), out)
		}
	})

	t.Run("install without the Prometheus Operator", func(t *testing.T) {
		h.run(t, "install", "plain", chart, "--namespace", "plain", "--create-namespace")
		manifest := h.run(t, "get", "manifest", "plain", "--namespace", "plain")
		objs := objects(t, manifest)
		if got := kinds(objs); !slices.Equal(got, baseKinds) {
			t.Errorf("the release holds %v, want %v (no ServiceMonitor or PrometheusRule without their API)", got, baseKinds)
		}
		requireObjects(t, cp, objs)
		cp.Kubectl(t, "get", "crd", "mcpconnections.tether.dev")
		// The token Secret holds a token made at install.
		token := cp.Kubectl(t, "get", "secret", "-n", "plain", "plain-tether-gateway-token", "-o", "jsonpath={.data.token}")
		if len(token) < 40 {
			t.Errorf("the gateway token Secret holds %q, want a random token", token)
		}
		// An upgrade keeps it: the agents that hold it keep working.
		h.run(t, "upgrade", "plain", chart, "--namespace", "plain")
		if again := cp.Kubectl(t, "get", "secret", "-n", "plain", "plain-tether-gateway-token", "-o", "jsonpath={.data.token}"); again != token {
			t.Errorf("helm upgrade changed the gateway token")
		}
	})

	t.Run("install with the Prometheus Operator", func(t *testing.T) {
		operator := filepath.Join("testdata", "prometheus-operator")
		cp.Kubectl(t, "apply", "--server-side", "-f", operator)
		cp.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s",
			"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")

		h.run(t, "install", "monitored", chart, "--namespace", "monitored", "--create-namespace")
		manifest := h.run(t, "get", "manifest", "monitored", "--namespace", "monitored")
		objs := objects(t, manifest)
		want := slices.Sorted(slices.Values(append([]string{"PrometheusRule", "ServiceMonitor"}, baseKinds...)))
		if got := kinds(objs); !slices.Equal(got, want) {
			t.Errorf("the release holds %v, want %v", got, want)
		}
		requireObjects(t, cp, objs)

		// The PrometheusRule holds the rules of
		// examples/prometheus/tether-alerts.yaml, unchanged.
		alerts, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "prometheus", "tether-alerts.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var file struct {
			Groups []any `json:"groups"`
		}
		if err := yaml.Unmarshal(alerts, &file); err != nil {
			t.Fatal(err)
		}
		var rule struct {
			Spec struct {
				Groups []any `json:"groups"`
			} `json:"spec"`
		}
		got := cp.Kubectl(t, "get", "prometheusrule", "-n", "monitored", "monitored-tether", "-o", "yaml")
		if err := yaml.Unmarshal([]byte(got), &rule); err != nil {
			t.Fatal(err)
		}
		if len(file.Groups) == 0 || !reflect.DeepEqual(rule.Spec.Groups, file.Groups) {
			t.Errorf("the PrometheusRule's groups are not those of tether-alerts.yaml:\n%s", got)
		}
	})
}

// kubectlStdin runs kubectl with stdin and returns its standard output.
func kubectlStdin(t *testing.T, cp *kubetest.ControlPlane, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := cp.KubectlCommand(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s\ninput:\n%s", strings.Join(args, " "), err, stderr.String(), stdin)
	}
	return string(out)
}

// dependsOn reads every file under paths, so that go test's cache, which
// records the files a test opens, runs the test again when one changes
// (the tools the test runs read them in processes of their own).
func dependsOn(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		err := filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			_, err = os.ReadFile(path)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// rendered is one object `helm template` printed, decoded.
type rendered struct {
	object
	doc  map[string]any
	text string
}

// render runs helm template on the chart as release tether in namespace ns
// with sets (key=value; an argument that begins with -- is passed as it is,
// a later --namespace included) and decodes every object; it returns helm's
// error instead when helm fails.
func render(t *testing.T, h helmRunner, chart string, sets ...string) ([]rendered, error) {
	t.Helper()
	args := []string{"template", "tether", chart, "--namespace", "ns"}
	for _, s := range sets {
		if strings.HasPrefix(s, "--") {
			args = append(args, s)
			continue
		}
		args = append(args, "--set", s)
	}
	out, err := h.command(t, "", args...)
	if err != nil {
		return nil, err
	}
	var objs []rendered
	for i, o := range objects(t, out) {
		r := rendered{object: o, text: documents(out)[i]}
		if err := yaml.Unmarshal([]byte(r.text), &r.doc); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, r)
	}
	return objs, nil
}

// find is the rendered object of kind and name; nil when there is none.
func find(objs []rendered, kind, name string) *rendered {
	for i := range objs {
		if objs[i].Kind == kind && objs[i].Metadata.Name == name {
			return &objs[i]
		}
	}
	return nil
}

// containerArgs is the tether container's args in the Deployment.
func containerArgs(t *testing.T, objs []rendered) []string {
	t.Helper()
	d := find(objs, "Deployment", "tether")
	if d == nil {
		t.Fatal("no Deployment tether rendered")
	}
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Args []string `json:"args"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(d.text), &dep); err != nil || len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("the Deployment has not one container (%v):\n%s", err, d.text)
	}
	return dep.Spec.Template.Spec.Containers[0].Args
}

// TestHelmChartValues renders the chart with the values docs/deploy.md lists
// and checks what each changes.
func TestHelmChartValues(t *testing.T) {
	h := helmRunner{bin: helmBinary(t)}
	chart := filepath.Join(repoRoot(t), "examples", "helm", "tether")
	dependsOn(t, chart)

	t.Run("defaults", func(t *testing.T) {
		objs, err := render(t, h, chart)
		if err != nil {
			t.Fatal(err)
		}
		args := containerArgs(t, objs)
		for _, want := range []string{"--kubernetes", "--namespace=ns", "--leader-elect", "--leader-elect-lease-name=tether", "--listen=:8808", "--auth-token-file=/run/secrets/tether/token", "--metrics-addr=:9464"} {
			if !slices.Contains(args, want) {
				t.Errorf("args %v lack %s", args, want)
			}
		}
		if d := find(objs, "Deployment", "tether"); !strings.Contains(d.text, "image: \"tether:dev\"") || !strings.Contains(d.text, "replicas: 2\n") {
			t.Errorf("the Deployment does not run 2 replicas of tether:dev:\n%s", d.text)
		}
		if find(objs, "Secret", "tether-gateway-token") == nil || find(objs, "PodDisruptionBudget", "tether") == nil ||
			find(objs, "Role", "tether-leader-election") == nil {
			t.Errorf("no token Secret, PodDisruptionBudget or leader-election Role: %v", kindsOf(objs))
		}
		if r := find(objs, "Role", "tether"); r == nil || strings.Contains(r.text, "secrets") {
			t.Errorf("the Role reads Secrets though watch.secretNames is empty")
		}
	})

	t.Run("image, resources and extra args", func(t *testing.T) {
		objs, err := render(t, h, chart, "image.repository=registry.example.com/tether", "image.tag=v1.2.3",
			"resources.limits.memory=1Gi", "extraArgs={--connect-timeout=20s}")
		if err != nil {
			t.Fatal(err)
		}
		d := find(objs, "Deployment", "tether")
		for _, want := range []string{`image: "registry.example.com/tether:v1.2.3"`, "memory: 1Gi"} {
			if !strings.Contains(d.text, want) {
				t.Errorf("the Deployment lacks %s:\n%s", want, d.text)
			}
		}
		if !slices.Contains(containerArgs(t, objs), "--connect-timeout=20s") {
			t.Errorf("extraArgs did not reach the args: %v", containerArgs(t, objs))
		}
	})

	t.Run("every namespace", func(t *testing.T) {
		objs, err := render(t, h, chart, "watch.allNamespaces=true")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(containerArgs(t, objs), "--all-namespaces") || slices.Contains(containerArgs(t, objs), "--namespace=ns") {
			t.Errorf("args %v: want --all-namespaces and no --namespace", containerArgs(t, objs))
		}
		// Cluster-scoped: named with the release's namespace too, so that
		// a release of the same name in another namespace has its own.
		if find(objs, "ClusterRole", "tether-ns") == nil || find(objs, "ClusterRoleBinding", "tether-ns") == nil || find(objs, "Role", "tether") != nil {
			t.Errorf("want a ClusterRole and its binding tether-ns instead of a Role: %v", kindsOf(objs))
		}
		other, err := render(t, h, chart, "watch.allNamespaces=true", "--namespace=other")
		if err != nil {
			t.Fatal(err)
		}
		if find(other, "ClusterRole", "tether-other") == nil || find(other, "ClusterRoleBinding", "tether-other") == nil {
			t.Errorf("the release tether of namespace other has no ClusterRole tether-other: %v", kindsOf(other))
		}
		if b := find(objs, "ClusterRoleBinding", "tether-ns"); b != nil {
			if got := field(t, b.doc, "roleRef", "name"); got != "tether-ns" {
				t.Errorf("the ClusterRoleBinding binds %v, want the ClusterRole tether-ns", got)
			}
		}
		if r := find(objs, "Role", "tether-leader-election"); r == nil || r.Metadata.Namespace != "ns" {
			t.Errorf("the Lease's Role is not in the release's namespace: %+v", r)
		}
	})

	t.Run("another namespace", func(t *testing.T) {
		objs, err := render(t, h, chart, "watch.namespace=agents")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(containerArgs(t, objs), "--namespace=agents") {
			t.Errorf("args %v lack --namespace=agents", containerArgs(t, objs))
		}
		for _, name := range []string{"tether", "tether-leader-election"} {
			if r := find(objs, "Role", name); r == nil || r.Metadata.Namespace != "agents" {
				t.Errorf("Role %s is not in the watched namespace agents: %+v", name, r)
			}
		}
	})

	t.Run("Secrets named", func(t *testing.T) {
		objs, err := render(t, h, chart, "watch.secretNames={github-mcp,slack}")
		if err != nil {
			t.Fatal(err)
		}
		if r := find(objs, "Role", "tether"); r == nil || !strings.Contains(r.text, `resourceNames: ["github-mcp","slack"]`) {
			t.Errorf("the Role does not name the Secrets:\n%v", r)
		}
	})

	t.Run("a token Secret of yours", func(t *testing.T) {
		objs, err := render(t, h, chart, "gateway.auth.existingSecret=mine")
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(kinds(objectsOf(objs)), "Secret") {
			t.Errorf("the chart made a Secret though existingSecret names one")
		}
		if d := find(objs, "Deployment", "tether"); !strings.Contains(d.text, "secretName: mine\n") {
			t.Errorf("the Deployment does not mount Secret mine:\n%s", d.text)
		}
	})

	t.Run("one replica without leader election", func(t *testing.T) {
		objs, err := render(t, h, chart, "replicaCount=1", "leaderElection.enabled=false")
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(containerArgs(t, objs), "--leader-elect") {
			t.Errorf("args %v hold --leader-elect", containerArgs(t, objs))
		}
		if find(objs, "PodDisruptionBudget", "tether") != nil || find(objs, "Role", "tether-leader-election") != nil {
			t.Errorf("a PodDisruptionBudget or a Lease Role for one replica without election: %v", kindsOf(objs))
		}
	})

	t.Run("replicas without leader election are refused", func(t *testing.T) {
		_, err := render(t, h, chart, "replicaCount=3", "leaderElection.enabled=false")
		if err == nil || !strings.Contains(err.Error(), "needs leaderElection.enabled") {
			t.Errorf("helm template with 3 replicas and no election: %v, want the chart's refusal", err)
		}
	})

	t.Run("ServiceAccount", func(t *testing.T) {
		objs, err := render(t, h, chart, "serviceAccount.annotations.iam\\.example\\.com/role=tether-reader")
		if err != nil {
			t.Fatal(err)
		}
		sa := find(objs, "ServiceAccount", "tether")
		if sa == nil {
			t.Fatalf("no ServiceAccount tether: %v", kindsOf(objs))
		}
		if got := field(t, sa.doc, "metadata", "annotations", "iam.example.com/role"); got != "tether-reader" {
			t.Errorf("the ServiceAccount's annotation is %v, want tether-reader", got)
		}

		// One of yours: none is made, and the pods and bindings name it.
		objs, err = render(t, h, chart, "serviceAccount.create=false", "serviceAccount.name=mine")
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(kindsOf(objs), "ServiceAccount") {
			t.Errorf("the chart made a ServiceAccount though serviceAccount.create is false")
		}
		checkServiceAccount(t, objs, "mine")

		// Neither made nor named: the namespace's default.
		objs, err = render(t, h, chart, "serviceAccount.create=false")
		if err != nil {
			t.Fatal(err)
		}
		checkServiceAccount(t, objs, "default")
	})

	t.Run("name overrides", func(t *testing.T) {
		objs, err := render(t, h, chart, "nameOverride=mcp-gateway")
		if err != nil {
			t.Fatal(err)
		}
		d := find(objs, "Deployment", "tether-mcp-gateway")
		if d == nil {
			t.Fatalf("nameOverride=mcp-gateway: no Deployment tether-mcp-gateway: %v", objectsOf(objs))
		}
		if got := field(t, d.doc, "spec", "selector", "matchLabels", "app.kubernetes.io/name"); got != "mcp-gateway" {
			t.Errorf("the selector's app.kubernetes.io/name is %v, want mcp-gateway", got)
		}

		objs, err = render(t, h, chart, "fullnameOverride=gw", "--api-versions=monitoring.coreos.com/v1")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objectsOf(objs) {
			if !strings.HasPrefix(o.Metadata.Name, "gw") {
				t.Errorf("fullnameOverride=gw: %s is not named gw…", o)
			}
		}
		for _, k := range []string{"Deployment", "Service", "ServiceAccount", "Role", "RoleBinding", "PodDisruptionBudget", "ServiceMonitor", "PrometheusRule"} {
			if find(objs, k, "gw") == nil {
				t.Errorf("fullnameOverride=gw: no %s gw: %v", k, objectsOf(objs))
			}
		}
		// The alert rules match job="tether" whatever the names.
		if sm := find(objs, "ServiceMonitor", "gw"); sm != nil {
			want := []any{map[string]any{"action": "replace", "targetLabel": "job", "replacement": "tether"}}
			if got := field(t, sm.doc, "spec", "endpoints", 0, "relabelings"); !reflect.DeepEqual(got, want) {
				t.Errorf("the ServiceMonitor's relabelings are %v, want job=tether", got)
			}
		}
	})

	// Every other value of docs/deploy.md's table, and where it lands.
	for _, c := range []struct {
		name      string
		sets      []string
		kind, obj string
		path      []any
		want      string // YAML
	}{
		{"gateway.auth.token", []string{"gateway.auth.token=s3cr3t"}, "Secret", "tether-gateway-token", []any{"data", "token"}, `"czNjcjN0"`},
		{"gateway.port (Service)", []string{"gateway.port=9000"}, "Service", "tether", []any{"spec", "ports", 0}, `{name: mcp, port: 9000, targetPort: mcp}`},
		{"gateway.port (container)", []string{"gateway.port=9000"}, "Deployment", "tether", []any{"spec", "template", "spec", "containers", 0, "ports", 0}, `{name: mcp, containerPort: 9000}`},
		{"metrics.port", []string{"metrics.port=9100"}, "Service", "tether", []any{"spec", "ports", 1}, `{name: metrics, port: 9100, targetPort: metrics}`},
		{"leaderElection.leaseName (Role)", []string{"leaderElection.leaseName=gw"}, "Role", "tether-leader-election", []any{"rules", 1, "resourceNames"}, `[gw]`},
		{"image.pullPolicy", []string{"image.pullPolicy=Always"}, "Deployment", "tether", []any{"spec", "template", "spec", "containers", 0, "imagePullPolicy"}, `Always`},
		{"nodeSelector", []string{"nodeSelector.disk=ssd"}, "Deployment", "tether", []any{"spec", "template", "spec", "nodeSelector"}, `{disk: ssd}`},
		{"tolerations", []string{"tolerations[0].key=mcp", "tolerations[0].operator=Exists"}, "Deployment", "tether", []any{"spec", "template", "spec", "tolerations"}, `[{key: mcp, operator: Exists}]`},
		{"affinity", []string{"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=1",
			"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key=zone",
			"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator=Exists"},
			"Deployment", "tether", []any{"spec", "template", "spec", "affinity"},
			`{nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, preference: {matchExpressions: [{key: zone, operator: Exists}]}}]}}`},
		{"podAnnotations", []string{"podAnnotations.team=agents"}, "Deployment", "tether", []any{"spec", "template", "metadata", "annotations"}, `{team: agents}`},
		{"imagePullSecrets", []string{"imagePullSecrets[0].name=registry"}, "Deployment", "tether", []any{"spec", "template", "spec", "imagePullSecrets"}, `[{name: registry}]`},
		{"podDisruptionBudget.minAvailable", []string{"podDisruptionBudget.minAvailable=50%"}, "PodDisruptionBudget", "tether", []any{"spec", "minAvailable"}, `"50%"`},
		{"metrics.serviceMonitor.interval", []string{"metrics.serviceMonitor.interval=1m", "--api-versions=monitoring.coreos.com/v1"}, "ServiceMonitor", "tether", []any{"spec", "endpoints", 0, "interval"}, `1m`},
		{"metrics.serviceMonitor.labels", []string{"metrics.serviceMonitor.labels.release=prom", "--api-versions=monitoring.coreos.com/v1"}, "ServiceMonitor", "tether", []any{"metadata", "labels", "release"}, `prom`},
		{"metrics.prometheusRule.labels", []string{"metrics.prometheusRule.labels.release=prom", "--api-versions=monitoring.coreos.com/v1"}, "PrometheusRule", "tether", []any{"metadata", "labels", "release"}, `prom`},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs, err := render(t, h, chart, c.sets...)
			if err != nil {
				t.Fatal(err)
			}
			o := find(objs, c.kind, c.obj)
			if o == nil {
				t.Fatalf("no %s %s rendered: %v", c.kind, c.obj, objectsOf(objs))
			}
			var want any
			if err := yaml.Unmarshal([]byte(c.want), &want); err != nil {
				t.Fatal(err)
			}
			if got := field(t, o.doc, c.path...); !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s at %v: %v, want %v", c.kind, c.obj, c.path, got, want)
			}
		})
	}

	t.Run("leaderElection.leaseName and logFormat reach the args", func(t *testing.T) {
		objs, err := render(t, h, chart, "leaderElection.leaseName=gw", "logFormat=text")
		if err != nil {
			t.Fatal(err)
		}
		args := containerArgs(t, objs)
		for _, want := range []string{"--leader-elect-lease-name=gw", "--log-format=text"} {
			if !slices.Contains(args, want) {
				t.Errorf("args %v lack %s", args, want)
			}
		}
	})

	t.Run("the Prometheus Operator's objects turned off", func(t *testing.T) {
		objs, err := render(t, h, chart, "metrics.serviceMonitor.enabled=false", "metrics.prometheusRule.enabled=false", "--api-versions=monitoring.coreos.com/v1")
		if err != nil {
			t.Fatal(err)
		}
		if k := kindsOf(objs); slices.Contains(k, "ServiceMonitor") || slices.Contains(k, "PrometheusRule") {
			t.Errorf("disabled, yet rendered: %v", k)
		}
	})
}

func objectsOf(rs []rendered) []object {
	var objs []object
	for _, r := range rs {
		objs = append(objs, r.object)
	}
	return objs
}

func kindsOf(rs []rendered) []string { return kinds(objectsOf(rs)) }

// field is the value at path (map keys and slice indexes) in doc; nil when
// there is none.
func field(t *testing.T, doc any, path ...any) any {
	t.Helper()
	v := doc
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		default:
			t.Fatalf("path element %v (%T)", p, p)
		}
	}
	return v
}

// checkServiceAccount checks that the pods run as the ServiceAccount name
// and that every binding names it.
func checkServiceAccount(t *testing.T, objs []rendered, name string) {
	t.Helper()
	d := find(objs, "Deployment", "tether")
	if d == nil {
		t.Fatal("no Deployment tether rendered")
	}
	if got := field(t, d.doc, "spec", "template", "spec", "serviceAccountName"); got != name {
		t.Errorf("the pods run as ServiceAccount %v, want %s", got, name)
	}
	for _, o := range objs {
		if o.Kind != "RoleBinding" && o.Kind != "ClusterRoleBinding" {
			continue
		}
		if got := field(t, o.doc, "subjects", 0, "name"); got != name {
			t.Errorf("%s binds ServiceAccount %v, want %s", o.object, got, name)
		}
	}
}

// TestHelmChartSchema: the chart's values.schema.json refuses a value of
// the wrong type or range and a key the chart does not know (a typo would
// otherwise be ignored), naming where it is.
func TestHelmChartSchema(t *testing.T) {
	h := helmRunner{bin: helmBinary(t)}
	chart := filepath.Join(repoRoot(t), "examples", "helm", "tether")
	dependsOn(t, chart)
	for _, c := range []struct{ set, want string }{
		{"replicaCount=abc", "at '/replicaCount': got string, want integer"},
		{"replicaCount=-1", "at '/replicaCount': minimum"},
		{"gateway.port=notaport", "at '/gateway/port': got string, want integer"},
		{"gateway.port=70000", "at '/gateway/port': maximum"},
		{"metrics.port=0", "at '/metrics/port': minimum"},
		{"replicas=5", "additional properties 'replicas' not allowed"},
		{"gateway.auth.tokn=x", "at '/gateway/auth': additional properties 'tokn' not allowed"},
		{"watch.allNamespace=true", "at '/watch': additional properties 'allNamespace' not allowed"},
		{"watch.allNamespaces=yes", "at '/watch/allNamespaces': got string, want boolean"},
		{"watch.secretNames={Not_A_Name}", "at '/watch/secretNames/0'"},
		{"logFormat=xml", "at '/logFormat': value must be one of 'text', 'json'"},
		{"image.pullPolicy=Sometimes", "at '/image/pullPolicy'"},
		{"metrics.serviceMonitor.interval=soon", "at '/metrics/serviceMonitor/interval'"},
		{"extraArgs={connect-timeout=20s}", "at '/extraArgs/0'"},
		{"serviceAccount.create=maybe", "at '/serviceAccount/create': got string, want boolean"},
	} {
		t.Run(c.set, func(t *testing.T) {
			_, err := render(t, h, chart, c.set)
			if err == nil {
				t.Fatalf("helm template --set %s rendered; want the schema's refusal", c.set)
			}
			if !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("helm template --set %s: %v\nwant the schema's refusal naming %q", c.set, err, c.want)
			}
		})
	}
	// The defaults, and values of the right kinds, pass.
	if _, err := render(t, h, chart, "replicaCount=3", "gateway.port=9000", "image.tag=123", "extraArgs={--connect-timeout=20s}",
		"podDisruptionBudget.minAvailable=50%", "gateway.auth.existingSecret=mine", "serviceAccount.create=false"); err != nil {
		t.Errorf("values of the right kinds refused: %v", err)
	}
}

// TestHelmChartMatchesBase renders the chart as the kustomize base runs
// tether (release tether in namespace mcp, the Secret github-mcp named) and
// compares what both write twice: the RBAC rules and the pod's spec (args,
// probes, security contexts, volumes, mounts, ports, resources), so that
// neither drifts from the other.
func TestHelmChartMatchesBase(t *testing.T) {
	h := helmRunner{bin: helmBinary(t)}
	root := repoRoot(t)
	chart := filepath.Join(root, "examples", "helm", "tether")
	base := filepath.Join(root, "examples", "kubernetes")
	dependsOn(t, chart, base)
	objs, err := render(t, h, chart, "--namespace=mcp", "watch.secretNames={github-mcp}")
	if err != nil {
		t.Fatal(err)
	}
	var baseObjs []rendered
	for _, f := range []string{"rbac.yaml", "deployment.yaml"} {
		b, err := os.ReadFile(filepath.Join(base, f))
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range objects(t, string(b)) {
			r := rendered{object: o, text: documents(string(b))[i]}
			if err := yaml.Unmarshal([]byte(r.text), &r.doc); err != nil {
				t.Fatal(err)
			}
			baseObjs = append(baseObjs, r)
		}
	}

	// RBAC: the base's one Role holds the rules of the chart's two (what
	// tether needs, and the Lease's), all in mcp, bound to tether's
	// ServiceAccount.
	rules := func(objs []rendered) []string {
		var rs []string
		for _, o := range objs {
			if o.Kind == "ClusterRole" {
				t.Errorf("%s: a ClusterRole for one namespace", o.object)
			}
			if o.Kind != "Role" {
				continue
			}
			if o.Metadata.Namespace != "mcp" {
				t.Errorf("%s is not in mcp", o.object)
			}
			for _, r := range field(t, o.doc, "rules").([]any) {
				j, err := json.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				rs = append(rs, string(j))
			}
		}
		sort.Strings(rs)
		return rs
	}
	if got, want := rules(objs), rules(baseObjs); !slices.Equal(got, want) {
		t.Errorf("the chart's RBAC rules differ from the base's:\nchart: %s\nbase:  %s", strings.Join(got, "\n       "), strings.Join(want, "\n       "))
	}
	for _, o := range append(slices.Clone(objs), baseObjs...) {
		if o.Kind == "RoleBinding" {
			want := []any{map[string]any{"kind": "ServiceAccount", "name": "tether", "namespace": "mcp"}}
			if got := field(t, o.doc, "subjects"); !reflect.DeepEqual(got, want) {
				t.Errorf("%s binds %v, want ServiceAccount mcp/tether", o.object, got)
			}
		}
	}

	// The pod: compared field by field. The chart names two values the base
	// leaves to tether's defaults (the namespace tether runs in, the Lease
	// tether): dropped from the chart's args before the comparison.
	chartDep, baseDep := find(objs, "Deployment", "tether"), find(baseObjs, "Deployment", "tether")
	if chartDep == nil || baseDep == nil {
		t.Fatalf("no Deployment tether: chart %v, base %v", objectsOf(objs), objectsOf(baseObjs))
	}
	chartArgs := slices.DeleteFunc(containerArgs(t, objs), func(a string) bool {
		return a == "--namespace=mcp" || a == "--leader-elect-lease-name=tether"
	})
	if baseArgs := containerArgs(t, baseObjs); !slices.Equal(chartArgs, baseArgs) {
		t.Errorf("the chart's args %v differ from the base's %v", chartArgs, baseArgs)
	}
	pod := []any{"spec", "template", "spec"}
	container := append(slices.Clone(pod), "containers", 0)
	for _, path := range [][]any{
		append(slices.Clone(pod), "securityContext"),
		append(slices.Clone(pod), "volumes"),
		append(slices.Clone(pod), "serviceAccountName"),
		append(slices.Clone(pod), "terminationGracePeriodSeconds"),
		append(slices.Clone(container), "name"),
		append(slices.Clone(container), "ports"),
		append(slices.Clone(container), "livenessProbe"),
		append(slices.Clone(container), "readinessProbe"),
		append(slices.Clone(container), "resources"),
		append(slices.Clone(container), "securityContext"),
		append(slices.Clone(container), "volumeMounts"),
		{"spec", "replicas"},
	} {
		got, want := field(t, chartDep.doc, path...), field(t, baseDep.doc, path...)
		if want == nil {
			t.Errorf("the base's Deployment has nothing at %v", path)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("the Deployments differ at %v:\nchart: %v\nbase:  %v", path, got, want)
		}
	}
}

// TestHelmDocsKeepTokensOffCommandLines: no command the README, docs/ or
// examples/ suggest puts a token in a process's arguments (the process list,
// the shell's history): Secrets are made with --from-file (a file or
// stdin), and the chart's token is a Secret of yours or a values file,
// never --set. docs/deploy.md says why the chart's random token needs a
// Secret of yours when helm template renders it.
func TestHelmDocsKeepTokensOffCommandLines(t *testing.T) {
	root := repoRoot(t)
	files := []string{filepath.Join(root, "README.md")}
	for _, dir := range []string{"docs", "examples"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, bad := range []string{"--from-literal=token", "--set gateway.auth.token"} {
				if strings.Contains(line, bad) {
					rel, _ := filepath.Rel(root, f)
					t.Errorf("%s:%d suggests a token on a command line (%s): %s", filepath.ToSlash(rel), i+1, bad, strings.TrimSpace(line))
				}
			}
		}
	}
	deploy, err := os.ReadFile(filepath.Join(root, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"`lookup`", "`helm template`", "Argo CD", "`gateway.auth.existingSecret`"} {
		if !strings.Contains(string(deploy), want) {
			t.Errorf("docs/deploy.md does not mention %s: it must say why the chart's random token needs a Secret of yours when rendered without the cluster", want)
		}
	}
}
