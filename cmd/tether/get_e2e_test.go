//go:build unix

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tether-mcp/tether/controller/statusview"
	"github.com/tether-mcp/tether/spec"
)

// TestImportRunGetWatch is the everyday path end to end, with the real
// binary and a real MCP server: import a Claude Desktop configuration,
// run tether on the result, follow it with `tether get -w`, suspend the
// connection by editing its manifest, and see the row for each phase.
func TestImportRunGetWatch(t *testing.T) {
	bin := builtBinaries(t)
	tetherBin := filepath.Join(bin, "tether")
	work := t.TempDir()
	config := filepath.Join(work, "claude_desktop_config.json")
	const secret = "fake-secret-value-0123"
	writeFile(t, config, `{"mcpServers": {"Everything": {
		"command": "`+filepath.Join(bin, "everything-server")+`",
		"env": {"API_TOKEN": "`+secret+`"}}}}`)
	dir := filepath.Join(work, "manifests")
	if out, err := exec.Command(tetherBin, "import", config, "--out", dir).CombinedOutput(); err != nil {
		t.Fatalf("tether import: %v\n%s", err, out)
	}
	manifest := filepath.Join(dir, "everything.yaml")

	startTether(t, dir)

	watch := exec.Command(tetherBin, "get", "-w", "--dir", dir)
	out, errOut := &getBuffer{}, &getBuffer{}
	watch.Stdout, watch.Stderr = out, errOut
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = watch.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = watch.Process.Kill() // already gone when the test got that far
		<-exited
	})

	phaseRow := func(phase string) func() bool {
		return func() bool {
			for _, l := range strings.Split(out.String(), "\n") {
				if f := strings.Fields(l); len(f) > 2 && f[0] == "everything" && f[2] == phase {
					return true
				}
			}
			return false
		}
	}
	getWaitFor(t, "get -w to print everything Connected", 30*time.Second, phaseRow("Connected"))

	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, manifest, strings.Replace(string(data), "spec:\n", "spec:\n  suspend: true\n", 1))
	getWaitFor(t, "get -w to print everything Suspended", 30*time.Second, phaseRow("Suspended"))

	// Interrupted, get -w ends cleanly.
	if err := watch.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("get -w after SIGINT: %v\nstderr: %s", waitErr, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("get -w did not exit within 10s of SIGINT")
	}

	// One-shot JSON agrees, and nothing shows the secret.
	js, err := exec.Command(tetherBin, "get", "--dir", dir, "-o", "json").Output()
	if err != nil {
		t.Fatalf("get -o json: %v", err)
	}
	var list statusview.List
	if err := json.Unmarshal(js, &list); err != nil {
		t.Fatalf("get -o json: %v\n%s", err, js)
	}
	if list.Kind != "List" || len(list.Items) != 1 || list.Items[0].Status.Phase != spec.PhaseSuspended {
		t.Errorf("get -o json: %s", js)
	}
	wide, _ := exec.Command(tetherBin, "get", "--dir", dir, "-o", "wide").CombinedOutput()
	status, _ := os.ReadFile(filepath.Join(dir, "everything.status.yaml"))
	for what, text := range map[string]string{"get -w": out.String() + errOut.String(), "get -o json": string(js), "get -o wide": string(wide), "the status file": string(status)} {
		if strings.Contains(text, secret) {
			t.Errorf("%s shows the secret", what)
		}
	}
	if !strings.Contains(string(wide), filepath.Join(bin, "everything-server")) {
		t.Errorf("get -o wide does not show the command:\n%s", wide)
	}
}
