// Package sandbox confines a stdio server with the kernel
// (docs/security.md): it turns a manifest's spec.stdio.sandbox into a Plan
// (absolute paths with their rights, the network, the limits), says what the
// running kernel cannot enforce of it (Check), and is the launcher: tether
// re-executes itself with LauncherArg, and Launch applies the plan to its
// own process (rlimits, the loopback interface of a new network namespace,
// Landlock with no new privileges) and then execs the server. The network
// namespace itself is made by the clone that starts the launcher
// (SysProcAttr), so the plan never runs a server half-confined.
//
// It must not keep state or know sessions: controller/connection starts the
// launcher and owns the process.
package sandbox
