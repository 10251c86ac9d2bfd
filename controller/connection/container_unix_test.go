//go:build unix

package connection

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestWriteContainerDir: the directory is 0700, what the container reads
// in it is readable by any of its users, and the env file holds the
// entries the entrypoint sets.
func TestWriteContainerDir(t *testing.T) {
	old := syscall.Umask(0o077) // the files must be readable whatever the umask
	defer syscall.Umask(old)
	parent := filepath.Join(t.TempDir(), "containers")
	dir, err := writeContainerDir(parent, "tether-x-1", []namedValue{{"A", "1"}, {"TOKEN", "s3cret"}}, []namedValue{{"api-token", "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		parent: 0o700, dir: 0o700, filepath.Join(dir, "secrets"): 0o755,
		filepath.Join(dir, "env"): 0o444, filepath.Join(dir, "secrets", "api-token"): 0o444,
	} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, mode %v, want %v", path, err, fi.Mode().Perm(), want)
		}
	}
	var env []string
	if b, err := os.ReadFile(filepath.Join(dir, "env")); err != nil || json.Unmarshal(b, &env) != nil || !slices.Equal(env, []string{"A=1", "TOKEN=s3cret"}) {
		t.Errorf("env file: %q (%v)", env, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "secrets", "api-token")); string(b) != "s3cret" {
		t.Errorf("secret file holds %q", b)
	}
	// A name taken already fails, and leaves nothing behind.
	if _, err := writeContainerDir(parent, "tether-x-1", nil, nil); err == nil {
		t.Errorf("a second directory of the same name was made")
	}
}
