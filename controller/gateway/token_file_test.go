//go:build unix

package gateway

import (
	"testing"

	"github.com/tether-mcp/tether/controller/boundedfile/boundedfiletest"
)

// An auth token file that is a FIFO, a device or too big is refused at
// once with an error naming it: start-up must not hang on it.
func TestReadTokenRefusesWhatIsNotATokenFile(t *testing.T) {
	dir := t.TempDir()
	fifo, zero, big := boundedfiletest.Hostile(t, dir, maxTokenFileSize)
	for file, want := range map[string]string{
		fifo: "gateway: auth token file: open " + fifo + ": not a regular file (a named pipe)",
		zero: "gateway: auth token file: open " + zero + ": not a regular file (a device)",
		big:  "gateway: auth token file: read " + big + ": file is 65537 bytes, over the limit of 65536",
	} {
		if b, err := readToken(file); err == nil || err.Error() != want || b != nil {
			t.Errorf("readToken(%s) = %q, %v; want %q", file, b, err, want)
		}
	}
}
