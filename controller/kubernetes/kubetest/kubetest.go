// Package kubetest starts a real Kubernetes control plane for a test: etcd
// and kube-apiserver, built from Go modules by hack/install-controlplane.sh,
// on loopback ports of their own, with an admin kubeconfig (and optionally
// an unprivileged user's) and kubectl to drive it. It stops the processes
// when the test ends. docs/controlplane.md says how it is built and why each
// flag is there.
//
// It owns the processes, their ports, certificates, tokens and logs. It knows
// nothing of tether's objects: CRDs, RBAC and namespaces are the tests' to
// create. There is no controller-manager, scheduler or kubelet: objects are
// stored and served, nothing acts on them (no pods run, no service account
// tokens are minted, namespaces are not finalized).
package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tether-mcp/tether/hack/testport"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// BinDirEnv names the environment variable that overrides where the
// binaries are looked up (default: _output/controlplane/bin at the root of
// the repository).
const BinDirEnv = "TETHER_CONTROLPLANE_BIN"

// The users the token file defines. AdminUser is in system:masters (every
// permission, RBAC or not); UnprivilegedUser has no group but
// system:authenticated, so RBAC grants it nothing beyond discovery until a
// test binds a role to it.
const (
	AdminUser        = "kubetest-admin"
	UnprivilegedUser = "kubetest-user"
)

// installScript is what makes the binaries, named in skip and fail messages.
const installScript = "hack/install-controlplane.sh"

// readyTimeout bounds each wait for a process to become ready. A cold
// kube-apiserver is ready in 2-4 s on an idle 2-core machine; the margin is
// for a loaded CI machine.
const readyTimeout = 90 * time.Second

// pollInterval is how often readiness is polled.
const pollInterval = 50 * time.Millisecond

// startAttempts is how many times a start is tried with fresh ports when a
// port picked as free was taken by someone else before the process bound it.
const startAttempts = 3

// Options changes what Start sets up.
type Options struct {
	// UnprivilegedUser adds UnprivilegedUser to the token file and fills
	// ControlPlane.UserConfig and UserKubeconfig, for RBAC tests.
	UnprivilegedUser bool
	// APIServerFlags are appended to kube-apiserver's flags (a later flag
	// wins over an earlier one of the same name).
	APIServerFlags []string
}

// ControlPlane is a running etcd and kube-apiserver. Its methods are called
// from the test's goroutine.
type ControlPlane struct {
	// Dir holds the logs (etcd.log, kube-apiserver.log), etcd's data, the
	// certificates, the token file and the kubeconfigs. It is removed when
	// the test ends.
	Dir string
	// Host is the apiserver's URL, https://127.0.0.1:PORT. It stays the
	// same across RestartAPIServer.
	Host string
	// Kubeconfig is the path of a kubeconfig for AdminUser, Config the same
	// as a *rest.Config (copy it with rest.CopyConfig before changing it).
	Kubeconfig string
	Config     *rest.Config
	// UserKubeconfig and UserConfig are UnprivilegedUser's, when
	// Options.UnprivilegedUser is set; otherwise empty and nil.
	UserKubeconfig string
	UserConfig     *rest.Config
	// KubectlPath is the kubectl binary built with the control plane.
	KubectlPath string
	// CAFile is the certificate (and its self-signed CA) that the apiserver
	// serves, which the kubeconfigs trust.
	CAFile string

	adminToken string
	etcd       *process
	apiserver  *process
}

// Start starts a control plane with the default Options. See
// StartWithOptions.
func Start(t testing.TB) *ControlPlane {
	t.Helper()
	return StartWithOptions(t, Options{})
}

// StartWithOptions starts etcd and kube-apiserver on free loopback ports,
// waits until the apiserver's /readyz answers 200 and writes the
// kubeconfigs. The test is skipped when the binaries are missing, except
// under CI=true where it fails. The processes are stopped, and their logs'
// tails printed if the test failed, when the test ends.
func StartWithOptions(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	bins := findBinaries(t)
	began := time.Now()

	dir := t.TempDir()
	cp := &ControlPlane{
		Dir:         dir,
		KubectlPath: bins.kubectl,
		CAFile:      filepath.Join(dir, "certs", "apiserver.crt"),
	}
	// Registered after TempDir's own cleanup, so it runs before the
	// directory (and the logs in it) is removed.
	t.Cleanup(func() {
		cp.apiserver.stop()
		cp.etcd.stop()
		if t.Failed() {
			cp.logTails(t)
		}
	})

	tokens, err := cp.writeCredentials(opts.UnprivilegedUser)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}

	for attempt := 1; ; attempt++ {
		err := cp.startProcesses(bins, opts)
		if err == nil {
			break
		}
		if errors.Is(err, errAddrInUse) && attempt < startAttempts {
			t.Logf("kubetest: %v; retrying with other ports", err)
			cp.apiserver.stop()
			cp.etcd.stop()
			continue
		}
		t.Fatalf("kubetest: %v", err)
	}

	if err := cp.writeKubeconfigs(tokens); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Logf("kubetest: control plane ready at %s in %s (logs in %s)", cp.Host, time.Since(began).Round(time.Millisecond), dir)
	return cp
}

// binaries are the paths of the three programs.
type binaries struct{ etcd, apiserver, kubectl string }

// findBinaries looks the binaries up in $TETHER_CONTROLPLANE_BIN or
// _output/controlplane/bin; it skips the test (fails it under CI=true) when
// one is missing.
func findBinaries(t testing.TB) binaries {
	t.Helper()
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			missing(t, fmt.Sprintf("%v; set %s to the directory of kube-apiserver, etcd and kubectl", err, BinDirEnv))
		}
		dir = filepath.Join(root, "_output", "controlplane", "bin")
	}
	b := binaries{
		etcd:      filepath.Join(dir, "etcd"),
		apiserver: filepath.Join(dir, "kube-apiserver"),
		kubectl:   filepath.Join(dir, "kubectl"),
	}
	for _, p := range []string{b.etcd, b.apiserver, b.kubectl} {
		st, err := os.Stat(p)
		if err == nil && st.Mode()&0o111 == 0 {
			err = errors.New("not executable")
		}
		if err != nil {
			missing(t, fmt.Sprintf("control plane binary %s: %v; build it with %s", p, err, installScript))
		}
	}
	return b
}

// missing skips the test, or fails it under CI=true where every test must run.
func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("kubetest: %s", msg)
	}
	t.Skipf("kubetest: %s", msg)
}

// repoRoot is the directory of tether's go.mod, found from the working
// directory up (go test runs a test in its package's directory).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/tether-mcp/tether\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the repository root (go.mod of github.com/tether-mcp/tether) is not above the working directory")
		}
		dir = parent
	}
}

// credentials are the bearer tokens written to the token file.
type credentials struct{ admin, user string }

// writeCredentials writes the token file and the service-account key.
func (cp *ControlPlane) writeCredentials(withUser bool) (credentials, error) {
	var c credentials
	var err error
	if c.admin, err = randomToken(); err != nil {
		return c, err
	}
	// token,user,uid,"group,..." — the static token file's CSV format.
	lines := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", c.admin, AdminUser, AdminUser)
	if withUser {
		if c.user, err = randomToken(); err != nil {
			return c, err
		}
		lines += fmt.Sprintf("%s,%s,%s\n", c.user, UnprivilegedUser, UnprivilegedUser)
	}
	if err := os.WriteFile(filepath.Join(cp.Dir, "tokens.csv"), []byte(lines), 0o600); err != nil {
		return c, fmt.Errorf("write token file: %w", err)
	}
	cp.adminToken = c.admin

	// kube-apiserver signs service account tokens with this key and checks
	// them with its public half (it reads a private key file for both).
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return c, fmt.Errorf("generate service account key: %w", err)
	}
	der := x509.MarshalPKCS1PrivateKey(key)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der})
	if err := os.WriteFile(filepath.Join(cp.Dir, "sa.key"), keyPEM, 0o600); err != nil {
		return c, fmt.Errorf("write service account key: %w", err)
	}
	return c, nil
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// errAddrInUse marks a start that failed because a port picked as free was
// taken before the process bound it.
var errAddrInUse = errors.New("a port picked as free was taken meanwhile")

// startProcesses picks ports and starts etcd, then kube-apiserver, waiting
// for each to be ready.
func (cp *ControlPlane) startProcesses(bins binaries, opts Options) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	// A failed attempt's data names its ports as the member's peer URL.
	dataDir := filepath.Join(cp.Dir, "etcd")
	if err := os.RemoveAll(dataDir); err != nil {
		return fmt.Errorf("remove etcd data of a failed attempt: %w", err)
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	cp.etcd = &process{
		name:    "etcd",
		path:    bins.etcd,
		logPath: filepath.Join(cp.Dir, "etcd.log"),
		args: []string{
			"--name=kubetest",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=kubetest=" + peerURL,
			// A test's data is thrown away: no fsync makes every write
			// (and so every apiserver write) much cheaper.
			"--unsafe-no-fsync",
			"--log-level=warn",
		},
	}
	if err := cp.etcd.start(); err != nil {
		return err
	}
	if err := waitReady(cp.etcd, etcdHealthy(clientURL)); err != nil {
		return err
	}

	cp.Host = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	cp.apiserver = &process{
		name:    "kube-apiserver",
		path:    bins.apiserver,
		logPath: filepath.Join(cp.Dir, "kube-apiserver.log"),
		args: append([]string{
			"--etcd-servers=" + clientURL,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[2]),
			// The apiserver advertises itself in the default/kubernetes
			// Endpoints; v1.37 refuses a loopback address for that unless
			// the endpoint reconciler is off, which a cluster without
			// pods does not miss.
			"--advertise-address=127.0.0.1",
			"--endpoint-reconciler-type=none",
			// It self-signs a serving certificate here on its first start
			// and reuses it on a restart, so kubeconfigs stay valid.
			"--cert-dir=" + filepath.Join(cp.Dir, "certs"),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + filepath.Join(cp.Dir, "sa.key"),
			"--service-account-signing-key-file=" + filepath.Join(cp.Dir, "sa.key"),
			"--service-cluster-ip-range=10.0.0.0/24",
			"--token-auth-file=" + filepath.Join(cp.Dir, "tokens.csv"),
			"--authorization-mode=RBAC",
			// On SIGTERM the apiserver drains; by default it leaves open
			// watches (every informer's) alone until its 60 s shutdown
			// timeout. With a grace period it ends them, as a rolling
			// restart of a real apiserver does, and exits in about a
			// second.
			"--shutdown-watch-termination-grace-period=2s",
		}, opts.APIServerFlags...),
	}
	return cp.startAPIServer()
}

// startAPIServer starts the apiserver process as configured and waits for
// /readyz.
func (cp *ControlPlane) startAPIServer() error {
	if err := cp.apiserver.start(); err != nil {
		return err
	}
	return waitReady(cp.apiserver, cp.apiserverReady())
}

// waitReady polls ready until it reports true, the process exits or
// readyTimeout passes. An error from ready is the reason it is not ready
// yet, reported if the wait ends without success.
func waitReady(p *process, ready func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last error
	for {
		ok, err := ready(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-p.exited:
			if p.addrInUse() {
				return fmt.Errorf("%s: %w", p.name, errAddrInUse)
			}
			return fmt.Errorf("%w before it was ready (the tail of %s follows)", p.exitError(), p.logPath)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s (last: %v; the tail of %s follows)", p.name, readyTimeout, last, p.logPath)
		case <-tick.C:
		}
	}
}

// etcdHealthy checks etcd's /health endpoint.
func etcdHealthy(clientURL string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		body, code, err := get(ctx, http.DefaultClient, clientURL+"/health", "")
		if err != nil {
			return false, err
		}
		if code != http.StatusOK || !strings.Contains(body, `"health":"true"`) {
			return false, fmt.Errorf("GET /health: %d %s", code, strings.TrimSpace(body))
		}
		return true, nil
	}
}

// apiserverReady checks /readyz as the admin, trusting the certificate that
// the apiserver wrote into its cert dir (which appears before it serves).
func (cp *ControlPlane) apiserverReady() func(context.Context) (bool, error) {
	var client *http.Client
	return func(ctx context.Context) (bool, error) {
		if client == nil {
			pool, err := caPool(cp.CAFile)
			if err != nil {
				return false, err
			}
			client = &http.Client{Transport: &http.Transport{
				TLSClientConfig:   &tls.Config{RootCAs: pool},
				DisableKeepAlives: true,
			}}
		}
		body, code, err := get(ctx, client, cp.Host+"/readyz", cp.adminToken)
		if err != nil {
			return false, err
		}
		if code != http.StatusOK {
			return false, fmt.Errorf("GET /readyz: %d %s", code, lastLines(body, 5))
		}
		return true, nil
	}
}

func caPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it (yet)", path)
	}
	return pool, nil
}

func get(ctx context.Context, client *http.Client, url, token string) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	_, err = io.Copy(&sb, io.LimitReader(resp.Body, 64<<10))
	return sb.String(), resp.StatusCode, err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freePorts returns n distinct loopback ports that were free a moment ago
// (hack/testport: below the ephemeral range, so that no test's outgoing
// connection takes one before the control plane binds it).
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		p, err := testport.Pick()
		if err != nil {
			return nil, fmt.Errorf("pick a free loopback port: %w", err)
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// writeKubeconfigs fills Config and Kubeconfig (and the user's) once the
// apiserver has written its certificate.
func (cp *ControlPlane) writeKubeconfigs(c credentials) error {
	ca, err := os.ReadFile(cp.CAFile)
	if err != nil {
		return fmt.Errorf("read the apiserver's certificate: %w", err)
	}
	cp.Config = cp.restConfig(ca, c.admin)
	cp.Kubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	if err := cp.writeKubeconfig(cp.Kubeconfig, AdminUser, c.admin); err != nil {
		return err
	}
	if c.user != "" {
		cp.UserConfig = cp.restConfig(ca, c.user)
		cp.UserKubeconfig = filepath.Join(cp.Dir, "user.kubeconfig")
		if err := cp.writeKubeconfig(cp.UserKubeconfig, UnprivilegedUser, c.user); err != nil {
			return err
		}
	}
	return nil
}

func (cp *ControlPlane) restConfig(ca []byte, token string) *rest.Config {
	return &rest.Config{
		Host:            cp.Host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		// client-go's default (5 QPS, burst 10) would make a test that
		// creates a few dozen objects wait on its own client.
		QPS:   100,
		Burst: 200,
	}
}

func (cp *ControlPlane) writeKubeconfig(path, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: cp.Host, CertificateAuthority: cp.CAFile}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "kubetest"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// StopAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after 15 s) and
// waits for it to exit; etcd keeps running. Clients see connection errors
// until StartAPIServer.
func (cp *ControlPlane) StopAPIServer(t testing.TB) {
	t.Helper()
	cp.apiserver.stop()
}

// StartAPIServer starts kube-apiserver again, on the same port, with the same
// certificate and tokens (Config and the kubeconfigs stay valid), and waits
// for /readyz.
func (cp *ControlPlane) StartAPIServer(t testing.TB) {
	t.Helper()
	if cp.apiserver.running() {
		t.Fatal("kubetest: StartAPIServer: kube-apiserver is running; StopAPIServer first")
	}
	if err := cp.startAPIServer(); err != nil {
		t.Fatalf("kubetest: restart: %v", err)
	}
}

// RestartAPIServer stops kube-apiserver and starts it again (see
// StopAPIServer and StartAPIServer); etcd and the stored objects stay.
func (cp *ControlPlane) RestartAPIServer(t testing.TB) {
	t.Helper()
	began := time.Now()
	cp.StopAPIServer(t)
	stopped := time.Since(began)
	cp.StartAPIServer(t)
	t.Logf("kubetest: kube-apiserver restarted in %s (stopped in %s)", time.Since(began).Round(time.Millisecond), stopped.Round(time.Millisecond))
}

// KubectlCommand returns kubectl with args, set up for AdminUser: the admin
// kubeconfig, and a discovery cache in Dir rather than ~/.kube/cache (where a
// previous control plane on the same port would have left stale resources).
func (cp *ControlPlane) KubectlCommand(ctx context.Context, args ...string) *exec.Cmd {
	full := append([]string{"--kubeconfig=" + cp.Kubeconfig, "--cache-dir=" + filepath.Join(cp.Dir, "kubectl-cache")}, args...)
	cmd := exec.CommandContext(ctx, cp.KubectlPath, full...)
	cmd.Env = childEnv()
	return cmd
}

// Kubectl runs kubectl with args as AdminUser and returns its standard
// output; it fails the test, with kubectl's standard error, if kubectl fails.
func (cp *ControlPlane) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := cp.KubectlCommand(ctx, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// logTails prints the end of each process's log.
func (cp *ControlPlane) logTails(t testing.TB) {
	for _, p := range []*process{cp.etcd, cp.apiserver} {
		if p != nil {
			t.Logf("kubetest: last lines of %s:\n%s", p.logPath, p.tail(40))
		}
	}
}
