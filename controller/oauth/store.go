package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/oauth2"

	"github.com/tether-mcp/tether/controller/atomicfile"
	"github.com/tether-mcp/tether/controller/boundedfile"
)

// DirName is the directory of token files under the state directory.
const DirName = "tokens"

// recordVersion is the format of a token file; a file of another version is
// not trusted (tether login writes it anew).
const recordVersion = 1

// Record is one token file: what `tether login NAME` obtained for one
// connection, and what tether run keeps current (a refreshed access token, a
// rotated refresh token, scopes a server asked for since).
type Record struct {
	Version int `json:"version"`
	// Server is the MCP endpoint the tokens are for (spec.http.url at
	// login): a manifest that now names another server needs a new login.
	Server string `json:"server"`
	// Resource is the resource indicator (RFC 8707) the tokens were issued
	// for, sent again with every refresh.
	Resource string `json:"resource,omitempty"`
	// TokenURL and AuthStyle say how to refresh: the authorization
	// server's token endpoint and how the client authenticates there.
	TokenURL  string           `json:"tokenURL"`
	AuthStyle oauth2.AuthStyle `json:"authStyle"`
	// ClientID is the client the tokens were issued to; ClientSecret is
	// the secret dynamic registration gave it (a secret of the manifest's
	// own is never written here).
	ClientID     string `json:"clientID"`
	ClientSecret string `json:"clientSecret,omitempty"`
	// Scopes are the scopes asked for at login.
	Scopes []string `json:"scopes,omitempty"`
	// RequiredScopes are scopes a server asked for since (a 403 with
	// insufficient_scope): the next login asks for them too.
	RequiredScopes []string `json:"requiredScopes,omitempty"`

	AccessToken  string    `json:"accessToken"`
	TokenType    string    `json:"tokenType,omitempty"`
	RefreshToken string    `json:"refreshToken,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// Obtained is when the access token was obtained (login or refresh).
	Obtained time.Time `json:"obtained"`
}

// token is the record's token for golang.org/x/oauth2.
func (r *Record) token() *oauth2.Token {
	return &oauth2.Token{AccessToken: r.AccessToken, TokenType: r.TokenType, RefreshToken: r.RefreshToken, Expiry: r.Expiry}
}

// setToken takes in a token obtained at now. A refresh that brings no new
// refresh token keeps the old one (RFC 6749 §6).
func (r *Record) setToken(t *oauth2.Token, now time.Time) {
	r.AccessToken, r.TokenType, r.Expiry, r.Obtained = t.AccessToken, t.TokenType, t.Expiry, now
	if t.RefreshToken != "" {
		r.RefreshToken = t.RefreshToken
	}
}

// Store is the token directory of one state directory. Its methods are
// safe for concurrent use; token sources are shared by every session of a
// connection, so that a rotated refresh token is used once.
type Store struct {
	dir string
	now func() time.Time

	mu      sync.Mutex
	known   map[string][sha256.Size]byte // digest of the bytes last read or written, per name
	sources map[string]*TokenSource
}

// NewStore returns the store of the token directory under stateDir. The
// directory is made (mode 0700) when a token is first saved.
func NewStore(stateDir string) *Store {
	return &Store{
		dir:     filepath.Join(stateDir, DirName),
		now:     time.Now,
		known:   map[string][sha256.Size]byte{},
		sources: map[string]*TokenSource{},
	}
}

// Dir is the token directory.
func (s *Store) Dir() string { return s.dir }

// Path is name's token file.
func (s *Store) Path(name string) string { return filepath.Join(s.dir, name+".json") }

// Load reads name's token file; (nil, nil) when there is none. A file that
// cannot be used is an error that names it (and never quotes it).
func (s *Store) Load(name string) (*Record, error) {
	r, _, err := s.load(name)
	return r, err
}

// MaxTokenFileSize bounds a token file (docs/contract.md, Limits on
// files): a record of a few tokens, far below it.
const MaxTokenFileSize = 64 << 10

// readFile reads name's token file: a regular file under MaxTokenFileSize,
// tether's user's and not writable by others (it is in the state
// directory, docs/contract.md).
func (s *Store) readFile(name string) ([]byte, error) {
	data, fi, err := boundedfile.Read(s.Path(name), MaxTokenFileSize)
	if err == nil {
		if perr := boundedfile.CheckPrivate(fi); perr != nil {
			return nil, &fs.PathError{Op: "open", Path: s.Path(name), Err: perr}
		}
	}
	return data, err
}

// load is Load that also returns the digest of the bytes it read.
func (s *Store) load(name string) (*Record, [sha256.Size]byte, error) {
	data, err := s.readFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		s.mu.Lock()
		delete(s.known, name)
		s.mu.Unlock()
		return nil, [sha256.Size]byte{}, nil
	}
	if err != nil {
		return nil, [sha256.Size]byte{}, fmt.Errorf("token file %s: %w", s.Path(name), errors.Unwrap(err))
	}
	sum := sha256.Sum256(data)
	s.mu.Lock()
	s.known[name] = sum
	s.mu.Unlock()
	r, err := decodeRecord(s.Path(name), data)
	return r, sum, err
}

func decodeRecord(path string, data []byte) (*Record, error) {
	var r Record
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("token file %s is not one tether wrote (run tether login again): %s", path, jsonProblem(err))
	}
	if r.Version != recordVersion {
		return nil, fmt.Errorf("token file %s has version %d, not %d (run tether login again)", path, r.Version, recordVersion)
	}
	if r.AccessToken == "" && r.RefreshToken == "" {
		return nil, fmt.Errorf("token file %s holds no token (run tether login again)", path)
	}
	return &r, nil
}

// jsonProblem describes a decoding error without quoting the input.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %s has the wrong type", te.Field)
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field") {
		return msg
	}
	return "not a token record"
}

// Save writes name's token file atomically, mode 0600 in a 0700 directory.
func (s *Store) Save(name string, r *Record) error {
	_, err := s.save(name, r)
	return err
}

// save is Save that also returns the digest of the bytes it wrote.
func (s *Store) save(name string, r *Record) ([sha256.Size]byte, error) {
	r.Version = recordVersion
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("token file of %s: %w", name, err)
	}
	data = append(data, '\n')
	sum := sha256.Sum256(data)
	s.mu.Lock()
	// Known before the rename: the watcher, which reads the file after it,
	// finds its own write and stays quiet.
	s.known[name] = sum
	s.mu.Unlock()
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return sum, fmt.Errorf("token directory %s: %w", s.dir, errors.Unwrap(err))
	}
	if err := atomicfile.Write(s.Path(name), data, 0o600, 0o700); err != nil {
		return sum, fmt.Errorf("writing the token file %s: %w", s.Path(name), err)
	}
	return sum, nil
}

// differs reports whether name's file holds other bytes than those of sum
// (none: the file is missing).
func (s *Store) differs(name string, sum [sha256.Size]byte) bool {
	data, err := s.readFile(name)
	if err != nil {
		return sum != [sha256.Size]byte{}
	}
	return sha256.Sum256(data) != sum
}

// takeChange reports whether name's file differs from what the store last
// read or wrote (a `tether login` ran meanwhile), and makes what is there
// now the known content.
func (s *Store) takeChange(name string) bool {
	data, err := s.readFile(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	known, ok := s.known[name]
	if err != nil {
		delete(s.known, name)
		return ok // it was there and is gone (or unreadable now)
	}
	sum := sha256.Sum256(data)
	s.known[name] = sum
	return !ok || sum != known
}

// Watch tells onChange the name of every token file that another process
// (tether login) changed, created or removed, until ctx ends: the file
// differs from what this store last read or wrote, so its own writes stay
// quiet. It makes the token directory (0700) so that there is something to
// watch.
func (s *Store) Watch(ctx context.Context, log *slog.Logger, onChange func(name string)) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("token directory %s: %w", s.dir, errors.Unwrap(err))
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", s.dir, err)
	}
	defer w.Close()
	if err := w.Add(s.dir); err != nil {
		return fmt.Errorf("watching %s: %w", s.dir, err)
	}
	starting := true
	check := func(name string) {
		if !s.takeChange(name) {
			return
		}
		s.reload(name)
		if starting {
			log.Debug("token file found", "connection", name, "file", s.Path(name))
		} else {
			log.Info("token file changed", "connection", name, "file", s.Path(name))
		}
		onChange(name)
	}
	checkAll := func() {
		entries, _ := os.ReadDir(s.dir)
		seen := map[string]bool{}
		for _, e := range entries {
			if n, ok := tokenFileName(e.Name()); ok {
				seen[n] = true
				check(n)
			}
		}
		s.mu.Lock()
		var gone []string
		for n := range s.known {
			if !seen[n] {
				gone = append(gone, n)
			}
		}
		s.mu.Unlock()
		for _, n := range gone {
			check(n)
		}
	}
	// A login that ran while tether was starting counts too.
	checkAll()
	starting = false
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if n, ok := tokenFileName(filepath.Base(ev.Name)); ok {
				check(n)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			// An overflow lost events: look at every file.
			log.Warn("watching the token directory", "dir", s.dir, "err", err)
			checkAll()
		}
	}
}

// tokenFileName returns the connection name of a token file's base name;
// temporaries (hidden) and other files are not token files.
func tokenFileName(base string) (string, bool) {
	if strings.HasPrefix(base, ".") {
		return "", false
	}
	return strings.CutSuffix(base, ".json")
}

// reload makes name's token source, if there is one, read its file again.
func (s *Store) reload(name string) {
	s.mu.Lock()
	ts := s.sources[name]
	s.mu.Unlock()
	if ts != nil {
		ts.reload()
	}
}
