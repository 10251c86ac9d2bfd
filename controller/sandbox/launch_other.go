//go:build !linux

package sandbox

import (
	"fmt"
	"os"
	"runtime"
)

// DetectKernel: no Landlock here.
func DetectKernel() Kernel { return Kernel{} }

// ABI is 0: Landlock is Linux's.
func ABI() int { return 0 }

// Launch refuses: validation keeps spec.stdio.sandbox off this platform.
func Launch([]string) int {
	fmt.Fprintf(os.Stderr, "tether sandbox: not supported on %s\n", runtime.GOOS)
	return 126
}
