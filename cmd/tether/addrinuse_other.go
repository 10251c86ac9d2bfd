//go:build !windows

package main

import (
	"errors"
	"syscall"
)

// addrInUse reports whether err is a bind refused because the address is
// in use.
func addrInUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }
