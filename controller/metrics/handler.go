package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tether-mcp/tether/controller/httpguard"
)

// shutdownBound bounds the graceful part of ServeListener's shutdown: a scrape
// takes milliseconds, so anything still open after this is a stuck client.
const shutdownBound = 5 * time.Second

// Handler serves /metrics (text format, or OpenMetrics when the scraper asks
// for it), /healthz (200 while the process serves HTTP at all) and /readyz
// (200 once ready reports true, 503 before; a nil ready is always ready).
// It makes the gateway's Host and Origin checks first (origins, as the
// gateway's --allowed-origins): a page that rebinds its name to the
// loopback address must not read tether's connection names and errors.
func (m *Metrics) Handler(ready func() bool, origins httpguard.Origins) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		// A collector that fails (e.g. /proc unreadable) must not take the
		// tether_* metrics down with it.
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil && !ready() {
			plain(w, http.StatusServiceUnavailable, "not ready: the initial manifests have not all been reconciled yet")
			return
		}
		plain(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "tether\n\n/metrics  Prometheus metrics\n/healthz  liveness\n/readyz   readiness (initial manifests reconciled)")
	})
	return origins.Handler(mux)
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintln(w, body)
}

// Listen binds addr for ServeListener: a caller that binds first knows
// /readyz answers before it starts anything else, and learns of an address
// in use before it starts anything at all.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return ln, nil
}

// ServeListener serves h on ln (Listen) until ctx is done, then shuts
// down, giving open requests a bounded time to finish. It returns nil after
// a shutdown caused by ctx, or the error that stopped it at once. It
// closes ln.
func ServeListener(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		return fmt.Errorf("metrics: serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownBound)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	// Serve returns ErrServerClosed once Shutdown or Close began; wait for
	// it so that no goroutine outlives this call.
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("metrics: shutdown %s: %w", ln.Addr(), err)
	}
	return nil
}
