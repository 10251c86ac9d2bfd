//go:build !linux

// Command bench measures tether end to end on Linux (main.go): it reads
// /proc for the CPU, memory and file system figures it reports. Elsewhere
// it says so, so that `go build ./...` and `go vet ./...` pass on every
// platform tether is released for.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "bench: runs on Linux only (it reads /proc)")
	os.Exit(2)
}
