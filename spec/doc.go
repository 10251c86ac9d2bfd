// Package spec owns the McpConnection manifest: its types, strict decoding of
// manifest files, defaulting, validation and the spec hashes that tell the
// controller whether a change needs a reconnect.
//
// It works on bytes only: no file system, no network, no environment. Checks
// that need the machine (a command on PATH, a secret file that exists) belong
// to connect time, not here. Every error names the file, the document, the
// field path and what is wrong, and never carries a secret value.
package spec
