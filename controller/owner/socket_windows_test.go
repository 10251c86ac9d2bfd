//go:build windows

package owner

import (
	"context"
	"strings"
	"testing"
)

// The pipe is tether's user's: its owner is set to the user (not the
// Administrators group an elevated process would default to), so dial's
// check admits it, and its descriptor admits nobody else.
func TestPipeIsTheUsers(t *testing.T) {
	dir := t.TempDir()
	ln, err := Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
	}()
	conn, err := dial(context.Background(), dir)
	if err != nil {
		t.Fatalf("dialing the user's own pipe: %v", err)
	}
	conn.Close()
	user, err := currentUser()
	if err != nil {
		t.Fatal(err)
	}
	if sd := pipeSecurity(user); !strings.HasPrefix(sd, "O:"+user.String()+"D:P(") {
		t.Errorf("pipe security descriptor %q: want owner %s and a protected DACL", sd, user)
	}
}
