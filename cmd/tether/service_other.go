//go:build !windows

package main

import "context"

// asService: only Windows has a service control manager; elsewhere a
// service manager (systemd, launchd) stops tether with SIGTERM.
func asService(ctx context.Context) (context.Context, func(error), error) {
	return ctx, func(error) {}, nil
}
