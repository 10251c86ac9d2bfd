package main

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sys/windows/svc"
)

// stopWaitHint is what tether tells the service control manager a stop may
// take (STOP_PENDING's wait hint): the default --shutdown-timeout and some.
const stopWaitHint = 30 * time.Second

// asService runs tether as a Windows service when the service control
// manager started it (docs/contract.md §11): ctx ends on Stop or Shutdown,
// which tether handles as it does SIGTERM; done, called with what `tether
// run` returned, reports the service stopped. Started any other way (a
// console, a scheduled task) it returns ctx as it is.
func asService(ctx context.Context) (context.Context, func(error), error) {
	isService, err := svc.IsWindowsService()
	if err != nil {
		return nil, nil, fmt.Errorf("telling whether tether runs as a Windows service: %w", err)
	}
	if !isService {
		return ctx, func(error) {}, nil
	}
	// A plain cancel, as SIGTERM's: a stop asked for is a clean exit, not
	// an error (context.Canceled is no failure to `tether run`).
	ctx, cancel := context.WithCancelCause(ctx)
	h := newServiceHandler(func() { cancel(nil) })
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		// The name is not checked for a service of its own process.
		if err := svc.Run("tether", h); err != nil {
			cancel(fmt.Errorf("running as a Windows service: %w", err))
		}
	}()
	return ctx, func(err error) {
		h.finish(err)
		<-returned
	}, nil
}

// serviceHandler answers the service control manager: Running until a Stop
// or Shutdown, then StopPending while tether stops its connections, until
// finish.
type serviceHandler struct {
	stop func()        // starts tether's shutdown
	done chan struct{} // closed by finish
	err  error         // what tether ended with; read after done
}

func newServiceHandler(stop func()) *serviceHandler {
	return &serviceHandler{stop: stop, done: make(chan struct{})}
}

// finish reports that tether has stopped, with err (nil: cleanly).
func (h *serviceHandler) finish(err error) {
	h.err = err
	close(h.done)
}

// Execute is svc.Handler's: it returns when tether has stopped, which the
// service control manager takes as the service Stopped; a failed tether
// stops with the service-specific exit code 1.
func (h *serviceHandler) Execute(_ []string, requests <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	status <- svc.Status{State: svc.StartPending}
	status <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}
	stopping := false
	for {
		select {
		case r := <-requests:
			switch r.Cmd {
			case svc.Interrogate:
				status <- r.CurrentStatus
			case svc.Stop, svc.Shutdown:
				if !stopping {
					stopping = true
					status <- svc.Status{State: svc.StopPending, WaitHint: uint32(stopWaitHint / time.Millisecond)}
					h.stop()
				}
			}
		case <-h.done:
			if !stopping {
				status <- svc.Status{State: svc.StopPending}
			}
			if h.err != nil {
				return true, 1
			}
			return false, 0
		}
	}
}
