package owner

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
)

// SocketName is the control socket in the state directory.
const SocketName = "tether.sock"

// stateKey names a state directory in places shared by every directory
// (a named pipe, a Unix socket moved out of a directory whose path is too
// long): a digest of its absolute path.
func stateKey(stateDir string) string {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		abs = stateDir
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:8])
}
