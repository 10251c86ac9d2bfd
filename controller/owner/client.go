package owner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// ErrNoOwner is wrapped by Query's and DialSession's errors when nothing
// answers on the state directory's socket: no tether owns the directory
// (or the one that did is gone and left its record).
var ErrNoOwner = errors.New("no tether owns the directory")

// Query asks the owner of stateDir for its record.
func Query(ctx context.Context, stateDir string) (Record, error) {
	var rec Record
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialOwner(ctx, stateDir)
		},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://tether"+RecordPath, nil)
	if err != nil {
		return rec, err
	}
	resp, err := client.Do(req)
	if err != nil {
		var ne *noOwnerError
		if errors.As(err, &ne) {
			return rec, ne
		}
		return rec, fmt.Errorf("asking the owner of %s: %w", stateDir, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rec, fmt.Errorf("asking the owner of %s: %s", stateDir, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxRecordSize)).Decode(&rec); err != nil {
		return rec, fmt.Errorf("asking the owner of %s: %w", stateDir, err)
	}
	return rec, nil
}

// DialSession opens an MCP session with the owner of stateDir, framed as
// over stdio, announcing what this bridge does when the owner goes
// (BridgeTakeover, BridgeWait, BridgeSelf).
func DialSession(ctx context.Context, stateDir, bridge string) (io.ReadWriteCloser, error) {
	conn, err := dialOwner(ctx, stateDir)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://tether"+SessionPath, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", SessionProtocol)
	req.Header.Set(BridgeHeader, bridge)
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("opening a session with the owner of %s: %w", stateDir, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("opening a session with the owner of %s: %w", stateDir, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		conn.Close()
		return nil, fmt.Errorf("opening a session with the owner of %s: %s: %s", stateDir, resp.Status, msg)
	}
	_ = conn.SetDeadline(time.Time{})
	return &hijacked{Reader: br, Conn: conn}, nil
}

// noOwnerError is a failed dial: nobody listens on the socket.
type noOwnerError struct {
	stateDir string
	err      error
}

func (e *noOwnerError) Error() string {
	return fmt.Sprintf("%s (state directory %s): %v", ErrNoOwner, e.stateDir, e.err)
}
func (e *noOwnerError) Unwrap() []error { return []error{ErrNoOwner, e.err} }

func dialOwner(ctx context.Context, stateDir string) (net.Conn, error) {
	conn, err := dial(ctx, stateDir)
	if err != nil {
		return nil, &noOwnerError{stateDir: stateDir, err: err}
	}
	return conn, nil
}

// DefaultDir is the user's default directory of manifests: tether/manifests
// under the user's configuration directory ($XDG_CONFIG_HOME or
// ~/.config on Linux, ~/Library/Application Support on macOS, %AppData% on
// Windows). tether connect and tether get use it when told no directory.
func DefaultDir() (string, error) {
	base, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "tether", "manifests"), nil
}
