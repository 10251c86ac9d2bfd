//go:build !linux

package connection

import "syscall"

// namespaces: none off Linux (validation refuses spec.stdio.sandbox there).
func (c *confinement) namespaces(*syscall.SysProcAttr) {}

func namespaceRefused(error) bool { return false }

func (c *confinement) withoutNamespace() error { return nil }
