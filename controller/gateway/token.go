package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// bearerToken is the token the gateway requires, re-read when its file
// changes, as kubelet and Prometheus do with their credential files: a
// rotated token takes over at once and the old one stops working. Only the
// token's hash is kept. A file that cannot be read (removed, emptied, half
// written) keeps the last token in force, so a rotation by rename never
// locks every client out; the failure is logged.
type bearerToken struct {
	file string
	log  *slog.Logger
	hash atomic.Pointer[[sha256.Size]byte]
}

// loadBearerToken reads file once; the error names the file, never its
// content.
func loadBearerToken(file string, log *slog.Logger) (*bearerToken, error) {
	t := &bearerToken{file: file, log: log}
	b, err := readToken(file)
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256(b)
	t.hash.Store(&h)
	return t, nil
}

// reload reads the file again and reports whether the token changed.
func (t *bearerToken) reload() bool {
	b, err := readToken(t.file)
	if err != nil {
		t.log.Warn("auth token file unreadable; the last token stays in force", "err", err)
		return false
	}
	h := sha256.Sum256(b)
	if old := t.hash.Load(); old != nil && *old == h {
		return false
	}
	t.hash.Store(&h)
	t.log.Info("auth token file changed; the new token is in force", "file", t.file)
	return true
}

// watch re-reads the file whenever its directory changes (an editor's
// rename, a Kubernetes Secret's ..data swap), and every resync in case an
// event was missed, until ctx is done.
func (t *bearerToken) watch(ctx context.Context, resync time.Duration) {
	w, err := fsnotify.NewWatcher()
	if err == nil {
		if err = w.Add(filepath.Dir(t.file)); err != nil {
			w.Close()
		}
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if err != nil {
		t.log.Warn("cannot watch the auth token file; re-reading it periodically only", "file", t.file, "err", err)
	} else {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	// What changed between the first read and the watch: read again now
	// that events are caught (a rotation right after start waited for the
	// resync before).
	t.reload()
	tick := time.NewTicker(resync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-events:
			t.reload()
		case <-errs:
			t.reload()
		case <-tick.C:
			t.reload()
		}
	}
}

// requireBearer admits requests that carry the token in force. Both sides
// are hashed, so the comparison takes the same time whatever the length.
func requireBearer(token *bearerToken, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		scheme, got, ok := strings.Cut(auth, " ")
		have := sha256.Sum256([]byte(strings.TrimSpace(got)))
		want := token.hash.Load()
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(have[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tether"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// clientOf names the client of a request for the session table: the hash
// of the token it presented (requireBearer admitted it), or "" for every
// client when the gateway takes no token.
func clientOf(token *bearerToken) func(*http.Request) string {
	if token == nil {
		return func(*http.Request) string { return "" }
	}
	return func(r *http.Request) string {
		_, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		h := sha256.Sum256([]byte(strings.TrimSpace(got)))
		return string(h[:])
	}
}
