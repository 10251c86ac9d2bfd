//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// TestFaultDirectoryRemoved: a watched subdirectory and the watched root
// itself deleted and recreated (docs/reliability.md, row F9). Deleting ends
// the connections it held (children gone); recreating brings them back.
func TestFaultDirectoryRemoved(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	root := filepath.Join(t.TempDir(), "manifests")
	sub := filepath.Join(root, "team")
	top, inSub := filepath.Join(root, "top.yaml"), filepath.Join(sub, "sub.yaml")
	writeFile(t, top, faultManifest(t, "top", nil, quickBackoff))
	writeFile(t, inSub, faultManifest(t, "sub", nil, quickBackoff))
	startTether(t, root)
	waitStatus(t, top, "top", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	st := waitStatus(t, inSub, "sub", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))

	t.Run("subdirectory", func(t *testing.T) {
		must(t, os.RemoveAll(sub))
		if !processGone(st.Process.PID, 15*time.Second) {
			t.Fatalf("the child of a deleted directory's manifest %d still runs", st.Process.PID)
		}
		writeFile(t, inSub, faultManifest(t, "sub", nil, quickBackoff))
		waitStatus(t, inSub, "sub", 15*time.Second, "Connected again", phaseIs(spec.PhaseConnected))
	})

	t.Run("root", func(t *testing.T) {
		pids := map[string]int{}
		for name, m := range map[string]string{"top": top, "sub": inSub} {
			st, _ := readStatus(t, m, name)
			pids[name] = st.Process.PID
		}
		must(t, os.RemoveAll(root))
		for name, pid := range pids {
			if !processGone(pid, 15*time.Second) {
				t.Errorf("the child of %s (%d) still runs after the root was deleted", name, pid)
			}
		}
		writeFile(t, top, faultManifest(t, "top", nil, quickBackoff))
		writeFile(t, inSub, faultManifest(t, "sub", nil, quickBackoff))
		// The root is polled for once a second while it is missing.
		waitStatus(t, top, "top", 15*time.Second, "Connected again", phaseIs(spec.PhaseConnected))
		waitStatus(t, inSub, "sub", 15*time.Second, "Connected again", phaseIs(spec.PhaseConnected))
	})
}

// gitSync lays out a checkout the way kubernetes/git-sync does: worktrees
// under root/.worktrees/<rev>, and root/<link> a relative symlink to the
// current one, replaced atomically (a new link renamed over the old), the old
// worktree then deleted.
type gitSync struct {
	t    *testing.T
	root string
	link string
	rev  int
}

func (g *gitSync) publish(files map[string]string) {
	g.t.Helper()
	g.rev++
	wt := filepath.Join(".worktrees", fmt.Sprintf("rev%04d", g.rev))
	for name, content := range files {
		writeFile(g.t, filepath.Join(g.root, wt, name), content)
	}
	tmp := filepath.Join(g.root, "tmp-link")
	must(g.t, os.Symlink(wt, tmp))
	must(g.t, os.Rename(tmp, filepath.Join(g.root, g.link)))
	if g.rev > 1 {
		must(g.t, os.RemoveAll(filepath.Join(g.root, ".worktrees", fmt.Sprintf("rev%04d", g.rev-1))))
	}
}

// TestFaultGitSyncSwaps: three git-sync publications in a row, with --dir
// at the checkout root and at the link itself (docs/reliability.md, row
// F11). Every publication is picked up: no event names the manifest, the
// directory behind the link changes each time.
func TestFaultGitSyncSwaps(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	for _, c := range []struct{ name, dirOf string }{
		{"dir is the checkout root", "root"},
		{"dir is the link", "link"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &gitSync{t: t, root: t.TempDir(), link: "current"}
			statusDir := t.TempDir()
			manifest := func(rev int) map[string]string {
				return map[string]string{"gs.yaml": faultManifest(t, "gs", []string{"-stderr-line", fmt.Sprintf("rev %d", rev)}, quickBackoff)}
			}
			g.publish(manifest(1))
			dir, statusOf := g.root, filepath.Join(statusDir, "current", "gs.yaml")
			if c.dirOf == "link" {
				dir, statusOf = filepath.Join(g.root, g.link), filepath.Join(statusDir, "gs.yaml")
			}
			startTether(t, dir, "--status-dir", statusDir)
			for rev := 1; rev <= 3; rev++ {
				if rev > 1 {
					g.publish(manifest(rev))
				}
				want := fmt.Sprintf("rev %d", rev)
				waitStatus(t, statusOf, "gs", 15*time.Second, "Connected to "+want, func(st spec.ConnectionStatus) bool {
					return st.Phase == spec.PhaseConnected && st.Process != nil && len(st.Process.StderrTail) > 0 &&
						st.Process.StderrTail[len(st.Process.StderrTail)-1] == want
				})
			}
		})
	}
}
