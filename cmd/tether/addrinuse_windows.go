package main

import (
	"errors"

	"golang.org/x/sys/windows"
)

// addrInUse reports whether err is a bind refused because the address is
// in use: Winsock's WSAEADDRINUSE, which syscall.EADDRINUSE (a value Go
// invented for Windows) does not match.
func addrInUse(err error) bool { return errors.Is(err, windows.WSAEADDRINUSE) }
