//go:build linux && !amd64 && !arm64

package sandbox

// No filter is written for this architecture: Check reports what it would
// have refused (docs/security.md).
var filterArch seccompArchInfo
