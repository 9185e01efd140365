package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves /metrics, /healthz and /readyz. ready reports whether the
// processor can take work (connected and consuming).
func (m *Metrics) Handler(ready func() bool) http.Handler {
	mux := http.NewServeMux()
	if m != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready == nil || !ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// Listen binds addr at once, so a taken port fails start-up with a clear
// error, and returns a Serve function that runs until ctx ends.
func Listen(addr string, h http.Handler) (serve func(ctx context.Context) error, err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	return func(ctx context.Context) error {
		done := make(chan error, 1)
		go func() { done <- srv.Serve(l) }()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
		}
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := srv.Shutdown(shutdownCtx)
		if serveErr := <-done; !errors.Is(serveErr, http.ErrServerClosed) {
			return serveErr
		}
		return err
	}, nil
}
