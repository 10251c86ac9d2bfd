package main

import (
	"net"
	"testing"
)

// addrInUse knows the platform's "address already in use" (on Windows,
// Winsock's WSAEADDRINUSE, which syscall.EADDRINUSE does not match), so
// that a --stdio run whose default metrics port is taken serves on there
// too; other bind errors are not taken for it.
func TestAddrInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l2, err := net.Listen("tcp", l.Addr().String())
	if err == nil {
		l2.Close()
		t.Fatalf("bound %s twice", l.Addr())
	}
	if !addrInUse(err) {
		t.Errorf("addrInUse(%v) = false, want true", err)
	}
	if _, err := net.Listen("tcp", "127.0.0.1:99999"); err == nil || addrInUse(err) {
		t.Errorf("addrInUse(%v) = true for an invalid port, want false", err)
	}
}
