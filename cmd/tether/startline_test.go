package main

import (
	"net"
	"strconv"
	"testing"
)

// TestStartLineNamesWhatIsBound: the "tether starting" line names the
// addresses tether bound, not the flags' text: --listen's port 0 is the
// port the kernel chose, and metrics a --stdio run left off (its default
// port in use) are "off", not the address it could not have.
func TestStartLineNamesWhatIsBound(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for _, c := range []struct {
		o    runOptions
		ln   net.Listener
		want string
	}{
		{runOptions{listen: "127.0.0.1:0"}, ln, "http://127.0.0.1:" + port + "/mcp"},
		{runOptions{listen: "127.0.0.1:0", sse: true}, ln, "http://127.0.0.1:" + port + "/mcp and /sse"},
		{runOptions{listen: ""}, nil, "off"},
		{runOptions{listen: "127.0.0.1:8808", stdio: true}, nil, "stdio"},
	} {
		if got := gatewayDesc(&c.o, c.ln); got != c.want {
			t.Errorf("gatewayDesc(listen %q, sse %v, stdio %v) = %q, want %q", c.o.listen, c.o.sse, c.o.stdio, got, c.want)
		}
	}
	if got, want := metricsDesc(ln), "127.0.0.1:"+port; got != want {
		t.Errorf("metricsDesc(bound) = %q, want %q", got, want)
	}
	if got := metricsDesc(nil); got != "off" {
		t.Errorf("metricsDesc(none) = %q, want off", got)
	}
}
