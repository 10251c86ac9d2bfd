package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tether-mcp/tether/controller"
	"github.com/tether-mcp/tether/controller/bridge"
	"github.com/tether-mcp/tether/controller/gateway"
	"github.com/tether-mcp/tether/controller/owner"
)

// defaultOwnerWait is --owner-wait's default: a takeover waits for the old
// owner's connections to close (--shutdown-timeout, 15 s, at most), then
// for the new owner to listen.
const defaultOwnerWait = 30 * time.Second

// exitOwned is tether run's exit status when another tether owns the
// directory (docs/contract.md).
const exitOwned = 3

// takeover is what a bridge that took the directory over hands to the run
// it starts in-process.
type takeover struct {
	// clientGone closes when the bridge's client went away.
	clientGone <-chan struct{}
}

// serveControl listens on the state directory's control socket, writes
// the owner record and serves the owner's API and the gateway there.
func serveControl(ctx context.Context, o *runOptions, stateDir string, gw *gateway.Gateway, gatewayAddr *net.TCPAddr, ctrl *controller.Controller, log *slog.Logger, serve func(string, func(context.Context) error)) (*owner.Server, error) {
	ln, err := owner.Listen(stateDir)
	if err != nil {
		return nil, err
	}
	rec := owner.Record{
		PID:      os.Getpid(),
		Dir:      absPath(o.dir),
		StateDir: absPath(stateDir),
		Socket:   owner.SocketPath(stateDir),
		Started:  time.Now().UTC().Truncate(time.Second),
		Version:  version,
	}
	if o.statusDir != "" {
		rec.StatusDir = absPath(o.statusDir)
	}
	if gatewayAddr != nil {
		rec.Gateway = gatewayURL(gatewayAddr)
	}
	ctl := &owner.Server{
		Record: func() owner.Record { return rec },
		Serve:  gw.ServeConn,
		// A bridge's session waits, at most --connect-timeout, for the
		// connections' first outcomes, as a gateway client's first list
		// does (docs/contract.md §5).
		Ready: func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, o.connect)
			defer cancel()
			select {
			case <-ctrl.FirstOutcomes():
			case <-ctx.Done():
			}
		},
		MaxSessions: o.maxSessions,
		// A bridge that stops reading is cut as an HTTP stream is.
		WriteTimeout: o.streamWrite,
		Log:          log,
	}
	if err := owner.WriteRecord(stateDir, rec); err != nil {
		log.Warn("writing the owner record", "err", err)
	}
	log.Info("owner of the directory", "dir", rec.Dir, "socket", rec.Socket)
	serve("control socket", func(ctx context.Context) error {
		defer ctl.Wait()
		return gw.ServeLocal(ctx, ln, map[string]http.Handler{"/v1/": ctl.Handler(ctx)})
	})
	return ctl, nil
}

func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// ownedElsewhere is tether run's answer when another tether owns the
// directory: who, and how to reach it.
func ownedElsewhere(ctx context.Context, o *runOptions, stateDir string, stderr io.Writer) error {
	fmt.Fprintln(stderr, "error:", describeOwner(ctx, o.dir, stateDir))
	return exitCode(exitOwned)
}

// dyingOwnerWait bounds how long tether run waits for the lock of a
// directory whose owner does not answer on its control socket.
const dyingOwnerWait = 3 * time.Second

// ownerAnswers reports whether stateDir's owner answers on its control
// socket.
func ownerAnswers(ctx context.Context, stateDir string) bool {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := owner.Query(qctx, stateDir)
	return err == nil
}

// waitDyingOwner waits, at most dyingOwnerWait, for the lock of stateDir
// held by an owner that does not answer; owner.ErrOwned when it is still
// held then.
func waitDyingOwner(ctx context.Context, stateDir string, log *slog.Logger) (*owner.Lock, error) {
	log.Info("the directory's owner does not answer on its control socket: waiting for its lock", "bound", dyingOwnerWait)
	wctx, cancel := context.WithTimeout(ctx, dyingOwnerWait)
	defer cancel()
	lock, err := owner.WaitLock(wctx, stateDir)
	if err != nil && wctx.Err() != nil {
		return nil, owner.ErrOwned
	}
	return lock, err
}

// describeOwner names the owner of stateDir, asked on its socket; the
// record on disk only when the owner does not answer (it may be starting).
func describeOwner(ctx context.Context, dir, stateDir string) string {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rec, err := owner.Query(qctx, stateDir)
	if err != nil {
		who := "another tether (it does not answer on its control socket yet"
		if r, rerr := owner.ReadRecord(stateDir); rerr == nil && r.PID > 0 {
			who += fmt.Sprintf("; the last owner record names pid %d", r.PID)
		}
		return fmt.Sprintf("--dir %s is owned by %s), which holds the lock on %s: stop it first, or use tether connect --dir %s", dir, who, filepath.Join(stateDir, owner.LockName), dir)
	}
	reach := "tether connect --dir " + dir
	if rec.Gateway != "" {
		reach += ", or its gateway " + rec.Gateway
	}
	return fmt.Sprintf("--dir %s is owned by tether pid %d (since %s, control socket %s): reach it with %s; stop it first to run another here",
		dir, rec.PID, rec.Started.Format(time.RFC3339), rec.Socket, reach)
}

// runStdioBridge is tether run --stdio on a directory that has an owner:
// its client is bridged to the owner; when the owner goes, this bridge
// waits for the lock, and the one that gets it runs the controller
// in-process and carries on as the owner (docs/reliability.md).
func runStdioBridge(ctx context.Context, o *runOptions, log *slog.Logger, stderr io.Writer) error {
	stateDir := stateDirPath(o.stateDir, o.statusDir, o.dir)
	log.Info("the directory has an owner: bridging stdio to it", "dir", o.dir, "socket", owner.SocketPath(stateDir))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var kind atomic.Value
	kind.Store(owner.BridgeTakeover)
	clientGone := make(chan struct{})
	ran := make(chan error, 1)
	var owning atomic.Bool
	go func() {
		lock, err := owner.WaitLock(ctx, stateDir)
		if err != nil {
			ran <- nil
			return
		}
		owning.Store(true)
		// From now on the bridge's session is with this process: it is
		// not one that would take over.
		kind.Store(owner.BridgeSelf)
		log.Info("took the directory over: starting its connections", "dir", o.dir)
		to := *o
		to.takeover = &takeover{clientGone: clientGone}
		err = runController(ctx, &to, stderr)
		lock.Release()
		if err != nil {
			cancel(fmt.Errorf("after taking the directory over: %w", err))
		}
		ran <- err
	}()

	err := bridge.Run(ctx, bridge.Options{
		Dial: func(ctx context.Context) (io.ReadWriteCloser, error) {
			return owner.DialSession(ctx, stateDir, kind.Load().(string))
		},
		In:   os.Stdin,
		Out:  os.Stdout,
		Wait: o.ownerWait,
		Log:  log,
	})
	close(clientGone)
	if !owning.Load() {
		// Stop waiting for the lock.
		cancel(nil)
	}
	// A run this process owns ends (handing over when others are
	// attached), and its connections close, before the exit.
	if rerr := <-ran; err == nil || errors.Is(err, context.Canceled) {
		err = rerr
	}
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// gatewayURL is the URL a client on this host reaches the gateway bound to
// addr at: the port the kernel chose for --listen's port 0, and loopback
// for a listener on every interface.
func gatewayURL(addr *net.TCPAddr) string {
	ip := addr.IP
	if ip == nil || ip.IsUnspecified() {
		// Go listens on both stacks for an unspecified address.
		ip = net.IPv4(127, 0, 0, 1)
	}
	return "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(addr.Port)) + gateway.Path
}
