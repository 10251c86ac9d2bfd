package manifest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tether-mcp/tether/controller/boundedfile"
	"github.com/tether-mcp/tether/spec"
)

// IsManifestName reports whether a file name (not a path) names a manifest:
// .yaml/.yml, not a status file, not hidden, not an editor temporary.
func IsManifestName(name string) bool {
	if name == "" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "#") {
		return false
	}
	if strings.HasSuffix(name, "~") || strings.Contains(name, "___jb_") {
		return false
	}
	if IsStatusName(name) {
		return false
	}
	return strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")
}

// StatusSuffix ends the name of a manifest's status file: x.yaml and x.yml
// both have x.status.yaml.
const StatusSuffix = ".status.yaml"

// IsStatusName reports whether a file name is a status file's or one of
// its temporaries' (".x.status.yaml.tmp-…"): tether writes them, so they
// are never manifests and their events are tether's own.
func IsStatusName(name string) bool {
	return strings.Contains(name, StatusSuffix) || strings.Contains(name, ".status.yml")
}

// StatusName returns the file name (not path) of a manifest's status file.
func StatusName(manifest string) string {
	base := filepath.Base(manifest)
	return strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml") + StatusSuffix
}

// StatusOwners tells which manifest has which status file. x.yaml and x.yml
// would share x.status.yaml: the first to claim it (in path order) keeps
// it, the other is an error until one of them is renamed.
type StatusOwners map[string]string

// Claim records manifest as its status file's owner, or returns the problem
// when another manifest has it already.
func (o StatusOwners) Claim(manifest string) error {
	key := filepath.Join(filepath.Dir(filepath.Clean(manifest)), StatusName(manifest))
	if other, ok := o[key]; ok && other != filepath.Clean(manifest) {
		return fmt.Errorf("its status file %s would be %s's too: rename one of them", StatusName(manifest), filepath.Base(other))
	}
	o[key] = filepath.Clean(manifest)
	return nil
}

// Decode reads and decodes one manifest file, bounded by spec.MaxFileSize.
func Decode(path string) ([]spec.Document, error) {
	data, _, err := boundedfile.Read(path, spec.MaxFileSize)
	var tooLarge *boundedfile.TooLargeError
	if errors.As(err, &tooLarge) {
		return spec.OversizedFile(path, tooLarge.Size), nil
	}
	if err != nil {
		return nil, err
	}
	return spec.DecodeFile(path, data), nil
}

// ErrorReason drops the operation and path of an *os.PathError: messages
// that use it name the file already.
func ErrorReason(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
