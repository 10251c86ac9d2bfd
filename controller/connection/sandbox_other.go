//go:build !linux

package connection

import "syscall"

// launcherPath: tether's own executable.
func launcherPath(self string) string { return self }

// namespaces: none off Linux (validation refuses spec.stdio.sandbox there).
func (c *confinement) namespaces(*syscall.SysProcAttr) {}

func namespaceRefused(error) bool { return false }

func (c *confinement) withoutNamespace(int) error { return nil }
