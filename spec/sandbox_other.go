//go:build !linux

package spec

import "runtime"

// SandboxSupported says whether spec.stdio.sandbox can be enforced on this
// platform: not here, until it has an implementation (docs/security.md says
// what macOS could use).
const SandboxSupported = false

const sandboxPlatform = runtime.GOOS
