package spec

// SandboxSupported says whether spec.stdio.sandbox can be enforced on this
// platform: on Linux, by Landlock and namespaces (docs/security.md).
const SandboxSupported = true

const sandboxPlatform = "linux"
