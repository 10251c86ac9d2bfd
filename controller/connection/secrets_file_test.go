//go:build unix

package connection

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tether-mcp/tether/controller/boundedfile/boundedfiletest"

	"github.com/tether-mcp/tether/spec"
)

// A valueFrom.file that is a FIFO, a device or too big fails at once with
// an error naming the file and what is wrong, never its content: a FIFO
// held the connection in Connecting, /dev/zero had no end.
func TestValueFromFileRefusesWhatIsNotASecretFile(t *testing.T) {
	dir := t.TempDir()
	fifo, zero, big := boundedfiletest.Hostile(t, dir, MaxSecretFileSize)
	for file, want := range map[string]string{
		fifo: "valueFrom.file: open " + fifo + ": not a regular file (a named pipe)",
		zero: "valueFrom.file: open " + zero + ": not a regular file (a device)",
		big:  "valueFrom.file: read " + big + ": file is 131073 bytes, over the limit of 131072",
	} {
		v := spec.EnvVar{Name: "TOKEN", ValueFrom: &spec.ValueFrom{File: filepath.Base(file)}}
		got, err := resolveValue(context.Background(), v, valueSources{baseDir: dir, environ: os.Getenv})
		if err == nil || err.Error() != want || got != "" {
			t.Errorf("%s: resolveValue = %q, %v; want the error %q", file, got, err, want)
		}
	}
}
