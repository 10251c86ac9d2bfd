package main

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/windows/svc"
)

// runHandler runs h.Execute as svc.Run would, with channels the test
// drives, and returns them and Execute's result.
func runHandler(h *serviceHandler) (chan<- svc.ChangeRequest, <-chan svc.Status, <-chan [2]any) {
	requests := make(chan svc.ChangeRequest)
	status := make(chan svc.Status, 16)
	result := make(chan [2]any, 1)
	go func() {
		specific, code := h.Execute(nil, requests, status)
		result <- [2]any{specific, code}
	}()
	return requests, status, result
}

func nextStatus(t *testing.T, status <-chan svc.Status, want svc.State) svc.Status {
	t.Helper()
	select {
	case s := <-status:
		if s.State != want {
			t.Fatalf("service state %d, want %d", s.State, want)
		}
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("no service state %d within 10 s", want)
	}
	return svc.Status{}
}

// Stop and Shutdown start tether's shutdown (as SIGTERM does), the service
// is StopPending until tether has stopped, and then Stopped (Execute
// returns) with exit code 0, or the service-specific 1 when tether failed.
func TestServiceHandlerStop(t *testing.T) {
	for _, c := range []struct {
		cmd      svc.Cmd
		err      error
		specific bool
		code     uint32
	}{
		{svc.Stop, nil, false, 0},
		{svc.Shutdown, nil, false, 0},
		{svc.Stop, errors.New("failed"), true, 1},
	} {
		stopped := make(chan struct{})
		h := newServiceHandler(func() { close(stopped) })
		requests, status, result := runHandler(h)
		nextStatus(t, status, svc.StartPending)
		running := nextStatus(t, status, svc.Running)
		if running.Accepts != svc.AcceptStop|svc.AcceptShutdown {
			t.Errorf("Running accepts %d, want Stop and Shutdown", running.Accepts)
		}
		requests <- svc.ChangeRequest{Cmd: svc.Interrogate, CurrentStatus: running}
		nextStatus(t, status, svc.Running)

		requests <- svc.ChangeRequest{Cmd: c.cmd}
		nextStatus(t, status, svc.StopPending)
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d did not start tether's shutdown", c.cmd)
		}
		requests <- svc.ChangeRequest{Cmd: c.cmd} // a second request does not stop twice
		select {
		case r := <-result:
			t.Fatalf("the service stopped (%v) before tether had", r)
		default:
		}
		h.finish(c.err)
		r := <-result
		if r[0] != c.specific || r[1] != c.code {
			t.Errorf("%d with tether's %v: Execute returned %v, want %v %d", c.cmd, c.err, r, c.specific, c.code)
		}
	}
}

// A tether that stops by itself (an error) stops the service.
func TestServiceHandlerTetherEnds(t *testing.T) {
	h := newServiceHandler(func() { t.Error("stop called without a Stop request") })
	_, status, result := runHandler(h)
	nextStatus(t, status, svc.StartPending)
	nextStatus(t, status, svc.Running)
	h.finish(errors.New("bad flags"))
	nextStatus(t, status, svc.StopPending)
	if r := <-result; r[0] != true || r[1] != uint32(1) {
		t.Errorf("Execute returned %v, want the service-specific exit code 1", r)
	}
}
