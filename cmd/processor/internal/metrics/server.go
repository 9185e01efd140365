package metrics

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
)

// Handler serves /metrics, /healthz and /readyz (ready). A collector that
// fails costs its own series: the error is logged (SetLogger), never sent
// to a scraper, as a panic's holds a stack trace with source paths.
func (m *Metrics) Handler(ready func() bool) http.Handler {
	mux := http.NewServeMux()
	if m != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
			ErrorLog:      errorLog{m},
			ErrorHandling: promhttp.ContinueOnError,
		}))
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

// SetLogger makes /metrics log to l the errors of collecting and serving
// metrics; until it is called they go to slog.Default().
func (m *Metrics) SetLogger(l *slog.Logger) {
	if m != nil {
		m.logger.Store(l)
	}
}

type errorLog struct{ m *Metrics }

func (e errorLog) Println(v ...any) {
	cmp.Or(e.m.logger.Load(), slog.Default()).Warn("serving metrics", "err", strings.TrimSpace(fmt.Sprintln(v...)))
}

// serverLimits bound what the metrics server's clients hold: it shares the
// processor's file descriptors, and one out of them fails its provider
// calls and opens cooldowns the whole fleet obeys. The timeouts are
// http.Server's; past maxConns a client waits in the kernel's accept
// queue, holding no descriptor.
type serverLimits struct {
	readHeader, read, write, idle time.Duration
	maxHeaderBytes                int
	maxConns                      int
}

// defaultLimits are Serve's: a GET without a body has 10 s to arrive, a
// scrape 30 s to be written, an idle connection is kept 30 s for the
// status page's polls, and 64 connections serve a scraper or two and a few
// browsers.
var defaultLimits = serverLimits{
	readHeader:     5 * time.Second,
	read:           10 * time.Second,
	write:          30 * time.Second,
	idle:           30 * time.Second,
	maxHeaderBytes: 32 << 10,
	maxConns:       64,
}

// Serve serves h on l, within defaultLimits, until ctx ends, then closes
// l. The caller binds l before the processor starts, so that a taken port
// fails start-up before anything changes on NATS.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	return serve(ctx, l, h, defaultLimits)
}

// serve is Serve with the limits lim.
func serve(ctx context.Context, l net.Listener, h http.Handler, lim serverLimits) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.readHeader,
		ReadTimeout:       lim.read,
		WriteTimeout:      lim.write,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    lim.maxHeaderBytes,
	}
	l = netutil.LimitListener(l, lim.maxConns)
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
}
