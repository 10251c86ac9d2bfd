//go:build unix

package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tether connect that finds only a socket others may replace says so: the
// socket is refused, not merely absent.
func TestConnectSaysWhyNoOwnerAnswered(t *testing.T) {
	dir := t.TempDir()
	stateDir := filepath.Join(dir, ".tether")
	if err := os.Mkdir(stateDir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(stateDir, 0o777); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(stateDir, "tether.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	o := &connectOptions{dir: dir, wait: 50 * time.Millisecond, logLevel: "error"}
	var out, stderr bytes.Buffer
	in, client := io.Pipe() // a client that stays
	defer client.Close()
	err = o.run(context.Background(), in, &out, &stderr)
	if err == nil || !strings.Contains(err.Error(), "no tether owns "+dir) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("connect with a planted socket: %v, want no owner, the socket refused", err)
	}
}
