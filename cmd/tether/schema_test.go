//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// runCommand runs `tether args...` and returns its stdout; it fails the test
// on an error.
func runCommand(t *testing.T, args ...string) []byte {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		t.Fatalf("tether %v: %v\nstderr: %s", args, err, errOut.String())
	}
	return out.Bytes()
}

// checkGenerated compares a command's output with the checked-in file that
// holds it; -update rewrites the file.
func checkGenerated(t *testing.T, got []byte, file string) {
	t.Helper()
	if updateGolden() {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not the command's output: run hack/update-generated.sh (or go test -update)", filepath.ToSlash(file))
	}
}

// TestSchemaCommand: `tether schema` prints the schema the examples' editor
// line points at.
func TestSchemaCommand(t *testing.T) {
	checkGenerated(t, runCommand(t, "schema"), filepath.Join("..", "..", "examples", "schema", "mcpconnection.schema.json"))
}

func TestSchemaCommandTakesNoArguments(t *testing.T) {
	root := newRootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"schema", "extra"})
	if err := root.Execute(); err == nil {
		t.Error("tether schema extra: no error")
	}
}
