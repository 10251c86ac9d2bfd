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
	sum := sha256.Sum256([]byte(canonical(stateDir)))
	return hex.EncodeToString(sum[:8])
}

// canonical is stateDir's absolute path with its symbolic links resolved
// (on Windows, also in the case the disk has it): every spelling of one
// state directory, which its lock already treats as one, names one socket.
// A directory that does not exist yet is only made absolute; the next
// dial, once the owner made it, resolves it.
func canonical(stateDir string) string {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		abs = stateDir
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	return abs
}
