//go:build unix

package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/hack/testport"
)

// TestSubscriptionsBounded: the real tether in front of the go-sdk's
// everything-server (a resource template, test://template/{id}/data, and
// test://watched-resource, which it updates every 3 s), with
// --max-subscriptions-per-session 2 and --max-subscriptions 3. A client
// that subscribes past its session's bound gets the error naming the flag
// and keeps what it holds (the watched resource still delivers); another
// client is unaffected until the gateway's bound, which is refused naming
// its own flag (docs/contract.md §5a, docs/reliability.md C12).
func TestSubscriptionsBounded(t *testing.T) {
	dir := t.TempDir()
	bin := builtBinaries(t)
	goPort := testport.Free(t)
	startServer(t, nil, filepath.Join(bin, "everything-server"), fmt.Sprintf("-http=127.0.0.1:%d", goPort), "-stateless=false")
	waitTCP(t, goPort, 20*time.Second)
	writeFile(t, filepath.Join(dir, "go.yaml"), httpManifest("go", fmt.Sprintf("http://127.0.0.1:%d/mcp", goPort), "streamable", ""))
	gwPort := testport.Free(t)
	startTether(t, dir, "--listen", fmt.Sprintf("127.0.0.1:%d", gwPort),
		"--max-subscriptions-per-session", "2", "--max-subscriptions", "3")
	waitTCP(t, gwPort, 20*time.Second)
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", gwPort)
	a := connectAgent(t, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	b := connectAgent(t, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	waitStatus(t, filepath.Join(dir, "go.yaml"), "go", 30*time.Second, "Connected", phaseIs("Connected"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	subscribe := func(ag *mcpAgent, uri string) error {
		return ag.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	}
	// The go connection's catalog reaches the gateway just after Connected.
	deadline := time.Now().Add(20 * time.Second)
	for err := subscribe(a, "test://watched-resource"); err != nil; err = subscribe(a, "test://watched-resource") {
		if time.Now().After(deadline) {
			t.Fatalf("subscribe to test://watched-resource: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := subscribe(a, "test://template/1/data"); err != nil {
		t.Fatalf("the second subscription of a session bounded to 2: %v", err)
	}
	err := subscribe(a, "test://template/2/data")
	if err == nil || !strings.Contains(err.Error(), "--max-subscriptions-per-session") || !strings.Contains(err.Error(), "holds 2 resource subscriptions") {
		t.Fatalf("a third subscription of a session bounded to 2: %v, want an error naming --max-subscriptions-per-session", err)
	}
	if err := subscribe(a, "test://watched-resource"); err != nil {
		t.Errorf("subscribing again to a URI the session holds: %v", err)
	}
	waitUpdate(t, a, "test://watched-resource")

	// Another client: its own places, up to the gateway's 3 distinct URIs.
	if err := subscribe(b, "test://template/2/data"); err != nil {
		t.Fatalf("another client's subscription: %v", err)
	}
	if err := subscribe(b, "test://watched-resource"); err != nil {
		t.Fatalf("another client, a URI the gateway holds already: %v", err)
	}
	waitUpdate(t, b, "test://watched-resource")
	if err := b.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	err = subscribe(b, "test://template/3/data")
	if err == nil || !strings.Contains(err.Error(), "(--max-subscriptions)") {
		t.Fatalf("a fourth distinct URI with the gateway bounded to 3: %v, want an error naming --max-subscriptions", err)
	}
	// a let go of one: the place is b's now.
	if err := a.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://template/1/data"}); err != nil {
		t.Fatal(err)
	}
	if err := subscribe(b, "test://template/3/data"); err != nil {
		t.Fatalf("after another client unsubscribed: %v", err)
	}
	// Through it all a kept the watched resource.
	drain(a.updates)
	waitUpdate(t, a, "test://watched-resource")

	// A bound of 0 is refused at start (a tether that started anyway is
	// killed when the context ends).
	for _, flag := range []string{"--max-subscriptions-per-session", "--max-subscriptions"} {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := exec.CommandContext(rctx, filepath.Join(bin, "tether"), "run", "--dir", t.TempDir(), "--listen", "", "--metrics-addr", "", flag, "0").CombinedOutput()
		rcancel()
		if err == nil || !strings.Contains(string(out), "--max-subscriptions-per-session and --max-subscriptions must be at least 1") {
			t.Errorf("tether run %s 0: %v, %s; want it refused", flag, err, out)
		}
	}
}

// waitUpdate waits for notifications/resources/updated of uri at ag (the
// everything-server sends one every 3 s).
func waitUpdate(t *testing.T, ag *mcpAgent, uri string) {
	t.Helper()
	select {
	case got := <-ag.updates:
		if got != uri {
			t.Fatalf("update for %q, want %q", got, uri)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("no notifications/resources/updated for %s", uri)
	}
}

func drain(c chan string) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}
