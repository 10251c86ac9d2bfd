// Command conformanceclient is the client the MCP conformance suite's client
// mode runs, through hack/conformance-client:
//
//	conformance client --command hack/conformance-client --suite auth
//
// runs `hack/conformance-client <server-url>` with MCP_CONFORMANCE_SCENARIO
// and MCP_CONFORMANCE_CONTEXT set. It drives the real tether, as a person
// would: it writes a manifest for the URL with the scenario's OAuth settings
// (authorizationCode, or clientCredentials for the client credentials
// scenarios), runs `tether login` (playing the person: it follows the
// authorization URL the login prints, as a browser would), runs `tether
// run`, and makes the scenario's tools/call through tether's gateway. When
// a call says to log in again (a server that asks for more scope), it does,
// as the message says.
//
// The tether binary is $TETHER, else tether beside this program, else on
// PATH. It exits 0 when the scenario's calls succeeded.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/yaml"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// cimdURL is the client ID metadata document the suite's authorization
// servers accept, as the go-sdk's own conformance client names it.
const cimdURL = "https://conformance-test.local/client-metadata.json"

// name is the connection's name in the manifest.
const name = "conformance"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: conformance-client <server-url> (with MCP_CONFORMANCE_SCENARIO set)")
		os.Exit(2)
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	var cctx map[string]any
	if s := os.Getenv("MCP_CONFORMANCE_CONTEXT"); s != "" {
		if err := json.Unmarshal([]byte(s), &cctx); err != nil {
			fail("MCP_CONFORMANCE_CONTEXT: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := newRun(os.Args[1], scenario, cctx)
	if err != nil {
		fail("%v", err)
	}
	err = r.do(ctx)
	r.stop()
	if err != nil {
		r.dumpLogs()
	}
	os.RemoveAll(r.dir)
	if err != nil {
		fail("scenario %s: %v", scenario, err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "conformance-client: "+format+"\n", args...)
	os.Exit(1)
}

// run is one scenario's tether: a manifest directory, a gateway port, the
// tether run process.
type run struct {
	scenario string
	url      string
	cctx     map[string]any
	tether   string
	dir      string
	gateway  string
	cmd      *exec.Cmd
	runLog   string
	exited   chan struct{}
}

func newRun(url, scenario string, cctx map[string]any) (*run, error) {
	bin, err := tetherBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tether-conformance-")
	if err != nil {
		return nil, err
	}
	return &run{scenario: scenario, url: url, cctx: cctx, tether: bin, dir: dir, runLog: filepath.Join(dir, "run.log")}, nil
}

func tetherBinary() (string, error) {
	if p := os.Getenv("TETHER"); p != "" {
		return p, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "tether")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return exec.LookPath("tether")
}

func (r *run) ctxString(key string) string {
	s, _ := r.cctx[key].(string)
	return s
}

// manifest is the scenario's connection: OAuth as the scenario asks, tool
// names unchanged.
func (r *run) manifest() (string, error) {
	var oauth string
	switch {
	case r.scenario == "initialize" || r.scenario == "tools_call":
	case strings.HasPrefix(r.scenario, "auth/client-credentials-"):
		id, secret := r.ctxString("client_id"), r.ctxString("client_secret")
		if id == "" || secret == "" {
			return "", errors.New("the scenario gives no client_id and client_secret: tether's clientCredentials needs a client secret")
		}
		oauth = fmt.Sprintf("    oauth:\n      clientCredentials:\n        clientID: %q\n        clientSecret: {value: %q}\n", id, secret)
	case strings.HasPrefix(r.scenario, "auth/"):
		id, secret := r.ctxString("client_id"), r.ctxString("client_secret")
		switch {
		case id != "" && secret != "":
			oauth = fmt.Sprintf("    oauth:\n      authorizationCode:\n        clientID: %q\n        clientSecret: {value: %q}\n", id, secret)
		case id != "":
			oauth = fmt.Sprintf("    oauth:\n      authorizationCode:\n        clientID: %q\n", id)
		default:
			oauth = fmt.Sprintf("    oauth:\n      authorizationCode:\n        clientID: %q\n", cimdURL)
		}
	default:
		return "", fmt.Errorf("unknown scenario %q", r.scenario)
	}
	return fmt.Sprintf("apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: %s\nspec:\n  toolPrefix: \"\"\n  http:\n    url: %q\n%s",
		name, r.url, oauth), nil
}

// loginFirst reports whether a person logs in before tether run starts.
func (r *run) loginFirst() bool {
	return strings.HasPrefix(r.scenario, "auth/") && !strings.HasPrefix(r.scenario, "auth/client-credentials-")
}

func (r *run) do(ctx context.Context) error {
	m, err := r.manifest()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, name+".yaml"), []byte(m), 0o600); err != nil {
		return err
	}
	if r.loginFirst() {
		if err := r.login(ctx); err != nil {
			return err
		}
	}
	if err := r.start(); err != nil {
		return err
	}
	if err := r.waitPhase(ctx, spec.PhaseConnected); err != nil {
		return err
	}
	gw, err := r.connectGateway(ctx)
	if err != nil {
		return err
	}
	defer gw.Close()
	switch {
	case r.scenario == "initialize":
		_, err := gw.ListTools(ctx, nil)
		return err
	case r.scenario == "tools_call":
		return r.call(ctx, gw, "add_numbers", map[string]any{"a": 5, "b": 3})
	default:
		return r.call(ctx, gw, "test-tool", map[string]any{})
	}
}

// call makes a tools/call through the gateway once the gateway lists the
// tool. A call that fails saying to run tether login (the server asks for
// more scope) is followed by the login it asks for, at most twice, then
// made again.
func (r *run) call(ctx context.Context, gw *mcp.ClientSession, tool string, args map[string]any) error {
	if err := waitTool(ctx, gw, tool); err != nil {
		return err
	}
	for logins := 0; ; logins++ {
		res, err := gw.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err == nil && !res.IsError {
			return nil
		}
		msg := fmt.Sprint(err)
		if res != nil && res.IsError {
			msg = text(res)
		}
		if logins == 2 || !strings.Contains(msg, "tether login "+name) {
			return fmt.Errorf("tools/call %s: %s", tool, msg)
		}
		fmt.Fprintf(os.Stderr, "conformance-client: the call says to log in again: %s\n", msg)
		if err := r.login(ctx); err != nil {
			return err
		}
		// tether run takes the new tokens in when it sees the file: the
		// call is made again until it goes through or fails otherwise.
		if err := r.waitPhase(ctx, spec.PhaseConnected); err != nil {
			return err
		}
		if err := retryUntil(ctx, 5*time.Second, func() (bool, error) {
			res, err := gw.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			switch {
			case err == nil && !res.IsError:
				return true, nil
			case err != nil && strings.Contains(err.Error(), "tether login "+name):
				return false, nil
			case res != nil && res.IsError && strings.Contains(text(res), "tether login "+name):
				return false, nil
			}
			return true, fmt.Errorf("tools/call %s after the login: %v %s", tool, err, text(res))
		}); err == nil {
			return nil
		} else if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
}

// login runs `tether login` and plays the person: every authorization URL it
// prints is followed, redirects and all, back to its loopback receiver.
func (r *run) login(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, r.tether, "login", name, "--dir", r.dir, "--no-browser", "--timeout", "45s")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(stdout)
	var personErr error
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if u := strings.TrimSpace(line); strings.HasPrefix(u, "http") && !strings.Contains(u, " ") && strings.Contains(u, "?") {
			if err := approve(ctx, u); err != nil && personErr == nil {
				personErr = err
			}
		}
	}
	err = cmd.Wait()
	fmt.Fprintf(os.Stderr, "--- tether login:\n%s", out.String())
	if err != nil {
		return fmt.Errorf("tether login: %v (person: %v)", err, personErr)
	}
	return nil
}

// approve follows an authorization URL as a browser would: the suite's
// authorization servers approve at once and redirect to tether login's
// loopback receiver.
func approve(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("following the authorization URL ended with %s", resp.Status)
	}
	return nil
}

// start runs `tether run` with its gateway on a free loopback port.
func (r *run) start() error {
	port, err := testport.Pick()
	if err != nil {
		return err
	}
	r.gateway = fmt.Sprintf("127.0.0.1:%d", port)
	logf, err := os.Create(r.runLog)
	if err != nil {
		return err
	}
	r.cmd = exec.Command(r.tether, "run", "--dir", r.dir, "--listen", r.gateway, "--metrics-addr", "", "--log-level", "debug")
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	r.exited = make(chan struct{})
	go func() { _ = r.cmd.Wait(); logf.Close(); close(r.exited) }()
	return nil
}

// stop ends tether run (SIGTERM, as a service manager would).
func (r *run) stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(15 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	}
}

func (r *run) dumpLogs() {
	if b, err := os.ReadFile(r.runLog); err == nil {
		fmt.Fprintf(os.Stderr, "--- tether run:\n%s", b)
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, name+".status.yaml")); err == nil {
		fmt.Fprintf(os.Stderr, "--- status:\n%s", b)
	}
}

// waitPhase waits until the connection's status shows phase.
func (r *run) waitPhase(ctx context.Context, phase spec.Phase) error {
	var last spec.Phase
	err := retryUntil(ctx, 20*time.Second, func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(r.dir, name+".status.yaml"))
		if err != nil {
			return false, nil
		}
		var doc spec.StatusDocument
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return false, nil
		}
		last = doc.Status.Phase
		return last == phase, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for phase %s (last %q): %w", phase, last, err)
	}
	return nil
}

func (r *run) connectGateway(ctx context.Context) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "conformance-client", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + r.gateway + "/mcp"}, nil)
}

func waitTool(ctx context.Context, gw *mcp.ClientSession, tool string) error {
	return retryUntil(ctx, 20*time.Second, func() (bool, error) {
		res, err := gw.ListTools(ctx, nil)
		if err != nil {
			return false, err
		}
		for _, t := range res.Tools {
			if t.Name == tool {
				return true, nil
			}
		}
		return false, nil
	})
}

// retryUntil calls f until it is done or fails, bounded by d.
func retryUntil(ctx context.Context, d time.Duration, f func() (done bool, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		done, err := f()
		if done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func text(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
