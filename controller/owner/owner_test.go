//go:build unix

package owner

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A second lock on the directory fails while the first is held, even
// from another open file description (another process's flock), and is
// taken once it is released.
func TestLockIsExclusiveUntilReleased(t *testing.T) {
	dir := t.TempDir()
	first, err := TryLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TryLock(dir); !errors.Is(err, ErrOwned) {
		t.Fatalf("second TryLock while held: %v, want ErrOwned", err)
	}
	got := make(chan *Lock, 1)
	go func() {
		l, err := WaitLock(context.Background(), dir)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case <-got:
		t.Fatal("WaitLock returned while the lock was held")
	case <-time.After(50 * time.Millisecond):
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if _, err := TryLock(dir); !errors.Is(err, ErrOwned) {
		t.Fatalf("TryLock while the waiter holds it: %v, want ErrOwned", err)
	}
	must(t, second.Release())
	third, err := TryLock(dir)
	if err != nil {
		t.Fatalf("TryLock after every release: %v", err)
	}
	must(t, third.Release())
	must(t, third.Release()) // twice is harmless
}

// WaitLock gives up with its context, and a lock that came after it gave
// up is not kept.
func TestWaitLockGivesUpWithItsContext(t *testing.T) {
	dir := t.TempDir()
	held, err := TryLock(dir)
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := WaitLock(ctx, dir); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitLock past its context: %v", err)
	}
	must(t, held.Release())
	// The abandoned waiter takes the lock now and must give it back.
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := TryLock(dir)
		if err == nil {
			must(t, l.Release())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock stays taken after its waiter gave up: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The lock of a process that died is free: the kernel drops it.
func TestLockOfADeadProcessIsFree(t *testing.T) {
	if os.Getenv("OWNER_LOCK_CHILD") != "" {
		if _, err := TryLock(os.Getenv("OWNER_LOCK_CHILD")); err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString("locked\n")
		select {} // held until killed
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockOfADeadProcessIsFree$")
	cmd.Env = append(os.Environ(), "OWNER_LOCK_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	buf := make([]byte, 7)
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("child: %q, %v", buf, err)
	}
	if _, err := TryLock(dir); !errors.Is(err, ErrOwned) {
		t.Fatalf("TryLock while another process holds it: %v, want ErrOwned", err)
	}
	must(t, cmd.Process.Kill())
	_ = cmd.Wait()
	l, err := TryLock(dir)
	if err != nil {
		t.Fatalf("TryLock after the holder was killed: %v", err)
	}
	must(t, l.Release())
}

func TestRecordRoundTripsAndIsPrivate(t *testing.T) {
	dir := t.TempDir()
	want := Record{PID: 42, Dir: "/m", StatusDir: "/s", StateDir: dir, Gateway: "http://127.0.0.1:8808/mcp", Socket: SocketPath(dir), Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Version: "v1"}
	must(t, WriteRecord(dir, want))
	got, err := ReadRecord(dir)
	must(t, err)
	if got != want {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	fi, err := os.Stat(filepath.Join(dir, RecordName))
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("record mode %v, want 0600", fi.Mode().Perm())
	}
	must(t, os.WriteFile(filepath.Join(dir, RecordName), []byte("{not json"), 0o600))
	if _, err := ReadRecord(dir); err == nil || !strings.Contains(err.Error(), RecordName) {
		t.Errorf("a corrupt record: %v, want an error naming it", err)
	}
}

// A socket path too long for sun_path moves to a private directory of the
// user's own, named after the state directory; a short one stays in it.
func TestSocketPath(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // the fallback directory is the test's own
	short := realTempDir(t)
	if got := SocketPath(short); got != filepath.Join(short, SocketName) {
		t.Errorf("SocketPath(%s) = %s", short, got)
	}
	long := filepath.Join(short, strings.Repeat("d", 120))
	got := SocketPath(long)
	if len(got) > maxSocketPath || filepath.Dir(got) != shortSocketDir() {
		t.Errorf("SocketPath of a long directory = %s (%d bytes)", got, len(got))
	}
	if other := SocketPath(long + "x"); other == got {
		t.Errorf("two state directories share the socket %s", got)
	}
}

// The server answers its record and serves sessions on the socket, with
// its mode 0600; with no listener, clients get ErrNoOwner.
func TestServerOnTheSocket(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // the fallback directory is the test's own
	for _, long := range []bool{false, true} {
		dir := t.TempDir()
		if long {
			dir = filepath.Join(dir, strings.Repeat("l", 110))
			must(t, os.MkdirAll(dir, 0o700))
		}
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := Query(ctx, dir); !errors.Is(err, ErrNoOwner) {
			t.Errorf("Query with no owner: %v, want ErrNoOwner", err)
		}
		if _, err := DialSession(ctx, dir, BridgeWait); !errors.Is(err, ErrNoOwner) {
			t.Errorf("DialSession with no owner: %v, want ErrNoOwner", err)
		}
		ln, err := Listen(dir)
		must(t, err)
		fi, err := os.Stat(SocketPath(dir))
		must(t, err)
		if fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
			t.Errorf("socket %s: mode %v", SocketPath(dir), fi.Mode())
		}
		rec := Record{PID: 7, Dir: "/m", StateDir: dir, Socket: SocketPath(dir)}
		srv := &Server{
			Record:      func() Record { return rec },
			MaxSessions: 1,
			Serve: func(ctx context.Context, rwc io.ReadWriteCloser) error {
				// An echo, line by line, until the peer or ctx ends.
				go func() { <-ctx.Done(); rwc.Close() }()
				_, err := io.Copy(rwc, rwc)
				return err
			},
		}
		hs := &http.Server{Handler: srv.Handler(ctx)}
		go hs.Serve(ln)
		got, err := Query(ctx, dir)
		if err != nil || got != rec {
			t.Errorf("Query = %+v, %v; want %+v", got, err, rec)
		}
		s, err := DialSession(ctx, dir, BridgeTakeover)
		must(t, err)
		if _, err := io.WriteString(s, "ping\n"); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "ping\n" {
			t.Errorf("session echo: %q, %v", buf, err)
		}
		if n := srv.Attached(); n != 1 {
			t.Errorf("Attached = %d with one takeover bridge, want 1", n)
		}
		// Past MaxSessions: refused, not queued.
		if _, err := DialSession(ctx, dir, BridgeWait); err == nil || !strings.Contains(err.Error(), "503") {
			t.Errorf("a session past the bound: %v, want 503", err)
		}
		s.Close()
		// Its slot is free again once it ended (and the refused one took
		// none).
		deadline := time.Now().Add(10 * time.Second)
		for {
			again, err := DialSession(ctx, dir, BridgeWait)
			if err == nil {
				again.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no session admitted after the first ended: %v", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		hs.Close()
		srv.Wait()
		if n := srv.Attached(); n != 0 {
			t.Errorf("Attached = %d after the session ended", n)
		}
	}
}

// A socket path of exactly the longest length stays in the state
// directory.
func TestSocketPathAtTheLimit(t *testing.T) {
	base := realTempDir(t)
	need := maxSocketPath - len(base) - 2 - len(SocketName)
	if need < 1 {
		t.Skipf("the temporary directory %s is too long for this test", base)
	}
	dir := filepath.Join(base, strings.Repeat("x", need))
	if got := SocketPath(dir); got != filepath.Join(dir, SocketName) || len(got) != maxSocketPath {
		t.Errorf("SocketPath = %s (%d bytes), want it in the state directory at %d bytes", got, len(got), maxSocketPath)
	}
}

// The fallback directory: a dead owner's socket in it is replaced; one that
// others may write, or that is not a directory, is refused.
func TestListenInTheFallbackDirectory(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dir := filepath.Join(t.TempDir(), strings.Repeat("l", 110))
	must(t, os.MkdirAll(dir, 0o700))
	ln, err := Listen(dir)
	must(t, err)
	ln.(interface{ SetUnlinkOnClose(bool) }).SetUnlinkOnClose(false)
	must(t, ln.Close())
	if _, err := os.Stat(SocketPath(dir)); err != nil {
		t.Fatalf("the dead owner's socket: %v", err)
	}
	ln, err = Listen(dir)
	if err != nil {
		t.Fatalf("Listen over a dead owner's socket: %v", err)
	}
	must(t, ln.Close())

	must(t, os.Chmod(shortSocketDir(), 0o777))
	if _, err := Listen(dir); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Listen in a directory others may write: %v, want refused", err)
	}
	if _, err := DialSession(context.Background(), dir, BridgeWait); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("DialSession in a directory others may write: %v, want refused", err)
	}
	must(t, os.RemoveAll(shortSocketDir()))
	must(t, os.WriteFile(shortSocketDir(), nil, 0o600))
	if _, err := Listen(dir); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Listen where a file stands for the directory: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A session waiting for the owner to be ready ends when the owner does:
// shutdown is not held up by it.
func TestSessionWaitingForReadyEndsWithTheOwner(t *testing.T) {
	dir := t.TempDir()
	ln, err := Listen(dir)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan struct{})
	srv := &Server{
		Record: func() Record { return Record{} },
		Ready: func(ctx context.Context) {
			close(waiting)
			<-ctx.Done()
		},
		Serve: func(context.Context, io.ReadWriteCloser) error {
			t.Error("a session was served while the owner was not ready")
			return nil
		},
	}
	hs := &http.Server{Handler: srv.Handler(ctx)}
	go hs.Serve(ln)
	defer hs.Close()
	// Accepted at once; not served while the owner is not ready, and
	// closed unserved when the owner stops meanwhile.
	ended := make(chan error, 1)
	go func() {
		sess, err := DialSession(context.Background(), dir, BridgeWait)
		if err != nil {
			ended <- err
			return
		}
		defer sess.Close()
		_, err = sess.Read(make([]byte, 1))
		ended <- err
	}()
	<-waiting
	cancel()
	select {
	case err := <-ended:
		if !errors.Is(err, io.EOF) {
			t.Errorf("a session waiting while the owner stopped: %v, want it accepted, then EOF (closed unserved)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a session waiting for Ready held the owner's shutdown")
	}
	srv.Wait()
}

// A session is accepted before the owner is ready, however long that
// takes: a bridge's wait for an owner (its dial's deadline) does not end
// while the owner settles, and the session is served once it is ready.
func TestSessionAcceptedBeforeTheOwnerIsReady(t *testing.T) {
	dir := t.TempDir()
	ln, err := Listen(dir)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	srv := &Server{
		Record: func() Record { return Record{} },
		Ready: func(ctx context.Context) {
			select {
			case <-ready:
			case <-ctx.Done():
			}
		},
		Serve: func(_ context.Context, rwc io.ReadWriteCloser) error {
			_, err := io.Copy(rwc, rwc)
			return err
		},
	}
	hs := &http.Server{Handler: srv.Handler(ctx)}
	go hs.Serve(ln)
	defer hs.Close()
	dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer dcancel()
	sess, err := DialSession(dctx, dir, BridgeTakeover)
	close(ready)
	if err != nil {
		t.Fatalf("DialSession while the owner settles: %v, want the session accepted", err)
	}
	defer sess.Close()
	if n := srv.Attached(); n != 1 {
		t.Errorf("Attached = %d with a takeover session waiting to be served, want 1", n)
	}
	if _, err := io.WriteString(sess, "ping\n"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(sess, got); err != nil || string(got) != "ping\n" {
		t.Fatalf("the session once ready: %q, %v", got, err)
	}
}

// A session whose bridge never reads has its writes cut after
// WriteTimeout: it cannot hold up what the owner sends (a list_changed
// to every session) for ever.
func TestSessionThatNeverReadsIsCut(t *testing.T) {
	dir := t.TempDir()
	ln, err := Listen(dir)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	srv := &Server{
		Record:       func() Record { return Record{} },
		WriteTimeout: 100 * time.Millisecond,
		Serve: func(_ context.Context, rwc io.ReadWriteCloser) error {
			chunk := make([]byte, 64<<10)
			for {
				if _, err := rwc.Write(chunk); err != nil {
					served <- err
					return err
				}
			}
		},
	}
	hs := &http.Server{Handler: srv.Handler(ctx)}
	go hs.Serve(ln)
	defer hs.Close()
	s, err := DialSession(ctx, dir, BridgeWait)
	must(t, err)
	defer s.Close()
	select {
	case err := <-served:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the write to a bridge that never reads: %v, want a deadline error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write to a bridge that never reads is still blocked after 10 s")
	}
	s.Close()
	cancel()
	srv.Wait()
}

// A socket in a directory others may write, or that others may write
// itself, is refused: somebody else could have planted it there.
func TestDialRefusesASocketOthersMayReplace(t *testing.T) {
	dir := t.TempDir()
	must(t, os.Chmod(dir, 0o700))
	ln, err := Listen(dir)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := &Server{Record: func() Record { return Record{PID: 42} }}
	hs := &http.Server{Handler: srv.Handler(ctx)}
	go hs.Serve(ln)
	defer hs.Close()
	if rec, err := Query(ctx, dir); err != nil || rec.PID != 42 {
		t.Fatalf("Query of a private socket: %+v, %v", rec, err)
	}
	must(t, os.Chmod(dir, 0o777))
	if _, err := Query(ctx, dir); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Query with the state directory writable by others: %v, want refused", err)
	}
	if _, err := DialSession(ctx, dir, BridgeWait); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("DialSession with the state directory writable by others: %v, want refused", err)
	}
	must(t, os.Chmod(dir, 0o700))
	must(t, os.Chmod(SocketPath(dir), 0o666))
	if _, err := Query(ctx, dir); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Query of a socket writable by others: %v, want refused", err)
	}
}

// Every spelling of one state directory (a symbolic link to it) names the
// same socket, as it takes the same lock: a bridge given the link reaches
// the owner given the directory, whichever side of the length limit each
// spelling is.
func TestSocketPathOfALinkedStateDirectory(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // the fallback directory is the test's own
	base := t.TempDir()
	long := filepath.Join(base, strings.Repeat("l", 110))
	must(t, os.MkdirAll(long, 0o700))
	link := filepath.Join(base, "ln")
	must(t, os.Symlink(long, link))
	if a, b := SocketPath(long), SocketPath(link); a != b {
		t.Errorf("SocketPath of the directory %s, of a link to it %s", a, b)
	}
	ln, err := Listen(long)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := &Server{Record: func() Record { return Record{PID: 7} }}
	hs := &http.Server{Handler: srv.Handler(ctx)}
	go hs.Serve(ln)
	defer hs.Close()
	if rec, err := Query(ctx, link); err != nil || rec.PID != 7 {
		t.Errorf("Query through the link: %+v, %v", rec, err)
	}
}

// realTempDir is a temporary directory with its symbolic links resolved
// (macOS's /var is /private/var), as SocketPath names it.
func realTempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	return dir
}
