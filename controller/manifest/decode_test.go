package manifest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/controller/boundedfile"
	"github.com/tether-mcp/tether/spec"
)

// TestDecode: a manifest decodes; one over the limit is a document error
// that says so, without being read; one that cannot be opened, or is not a
// regular file, is an error.
func TestDecode(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(manifest("good", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if docs, err := Decode(good); err != nil || len(docs) != 1 || docs[0].Conn == nil || docs[0].Name != "good" {
		t.Errorf("Decode(good) = %+v, %v", docs, err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte(manifest("big", "")+strings.Repeat("#", spec.MaxFileSize)), 0o644); err != nil {
		t.Fatal(err)
	}
	docs, err := Decode(big)
	if err != nil || len(docs) != 1 || len(docs[0].Errors) != 1 || !strings.Contains(docs[0].Errors[0].Error(), "over the limit of 1048576") {
		t.Errorf("Decode(big) = %+v, %v; want one document error over the limit", docs, err)
	}
	if docs, err := Decode(filepath.Join(dir, "gone.yaml")); !errors.Is(err, fs.ErrNotExist) || docs != nil {
		t.Errorf("Decode(missing) = %+v, %v", docs, err)
	}
	if docs, err := Decode(dir); !errors.Is(err, boundedfile.ErrNotRegular) || docs != nil {
		t.Errorf("Decode(directory) = %+v, %v", docs, err)
	}
}
