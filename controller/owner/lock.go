package owner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// LockName is the lock file in the state directory. It stays empty: on
// Windows a locked range cannot be read, so what the owner says of itself
// is in RecordName instead.
const LockName = "owner.lock"

// ErrOwned is wrapped by TryLock's error when another process holds the
// lock.
var ErrOwned = errors.New("the directory has an owner")

// Lock is the held ownership of a state directory. The OS releases it when
// the process ends, however it ends, so a crashed owner never blocks the
// next one.
type Lock struct {
	f *os.File
}

// TryLock takes the lock of stateDir at once, or fails: with an error that
// wraps ErrOwned when another process holds it.
func TryLock(stateDir string) (*Lock, error) {
	f, err := openLockFile(stateDir)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f, false); err != nil {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("%s: %w", stateDir, ErrOwned)
		}
		return nil, fmt.Errorf("locking %s: %w", filepath.Join(stateDir, LockName), err)
	}
	return &Lock{f: f}, nil
}

// WaitLock blocks until it holds the lock of stateDir, or ctx is done. A
// lock that comes after ctx ended is released at once.
func WaitLock(ctx context.Context, stateDir string) (*Lock, error) {
	f, err := openLockFile(stateDir)
	if err != nil {
		return nil, err
	}
	type result struct{ err error }
	// Unbuffered: a lock that comes after WaitLock gave up must find
	// nobody to take it, and be given back.
	got := make(chan result)
	abandoned := make(chan struct{})
	go func() {
		// A blocking lock cannot be cancelled: the goroutine waits on, and
		// gives the lock back if nobody wants it any more.
		err := lockFile(f, true)
		select {
		case got <- result{err}:
		case <-abandoned:
			f.Close()
		}
	}()
	select {
	case r := <-got:
		if r.err != nil {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", filepath.Join(stateDir, LockName), r.err)
		}
		return &Lock{f: f}, nil
	case <-ctx.Done():
		close(abandoned)
		// The goroutine may have sent just before: it then owns nothing,
		// and the file must be closed here.
		select {
		case <-got:
			f.Close()
		default:
		}
		return nil, ctx.Err()
	}
}

// Release gives the lock back (closing the file releases it).
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

func openLockFile(stateDir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(stateDir, LockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the lock of state directory %s: %w", stateDir, err)
	}
	return f, nil
}
