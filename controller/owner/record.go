package owner

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tether-mcp/tether/controller/atomicfile"
	"github.com/tether-mcp/tether/controller/boundedfile"
)

// RecordName is the owner record in the state directory.
const RecordName = "owner.json"

// maxRecordSize bounds a record read back: a record is a few hundred bytes.
const maxRecordSize = 64 << 10

// Record is what an owner says of itself, in its state directory and on
// its socket (GET /v1/owner). It holds no secret: no token, no spec.
type Record struct {
	PID int `json:"pid"`
	// Dir is the directory of manifests watched, StatusDir where status
	// files go ("" beside the manifests), StateDir the state directory.
	Dir       string `json:"dir"`
	StatusDir string `json:"statusDir,omitempty"`
	StateDir  string `json:"stateDir"`
	// Gateway is the streamable HTTP endpoint's URL, "" when the owner
	// serves none (a --stdio owner).
	Gateway string `json:"gateway,omitempty"`
	// Socket is the control socket (a Unix socket's path, a named pipe's
	// name).
	Socket  string    `json:"socket"`
	Started time.Time `json:"started"`
	Version string    `json:"version,omitempty"`
}

// WriteRecord writes r into stateDir atomically, mode 0600.
func WriteRecord(stateDir string, r Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(stateDir, RecordName), append(b, '\n'), 0o600, 0o700)
}

// ReadRecord reads the record in stateDir. It says who owned the directory
// last, not who owns it now: only the lock (or an answer on the socket)
// tells that.
func ReadRecord(stateDir string) (Record, error) {
	var r Record
	b, _, err := boundedfile.Read(filepath.Join(stateDir, RecordName), maxRecordSize)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", filepath.Join(stateDir, RecordName), err)
	}
	return r, nil
}
