package metrics

import (
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

// Handler serves /metrics, /healthz and /readyz. ready reports whether the
// processor can take work (connected and consuming).
//
// A collector that fails costs its own series: /metrics serves the others
// and logs the error (SetLogger), and never sends a scraper the error's
// text, which for a collector's panic holds a stack trace with source paths.
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

// errorLog is promhttp's Logger on the logger of m.
type errorLog struct{ m *Metrics }

func (e errorLog) Println(v ...any) {
	l := e.m.logger.Load()
	if l == nil {
		l = slog.Default()
	}
	l.Warn("serving metrics", "err", strings.TrimSpace(fmt.Sprintln(v...)))
}

// serverLimits bound what the clients of the metrics server can hold. It
// shares the processor's file descriptors: a connection it holds is a
// descriptor the provider calls cannot have, and a processor out of
// descriptors fails its calls and opens cooldowns the whole fleet obeys.
type serverLimits struct {
	// readHeader, read, write and idle are the http.Server timeouts.
	readHeader, read, write, idle time.Duration
	// maxHeaderBytes is http.Server's MaxHeaderBytes.
	maxHeaderBytes int
	// maxConns bounds the connections held at once; past it the server
	// accepts no more until one closes, and a client waits in the
	// kernel's accept queue, holding no descriptor of the processor.
	maxConns int
}

// defaultLimits are Listen's limits.
var defaultLimits = serverLimits{
	readHeader: 5 * time.Second,
	// Every path is a GET without a body.
	read: 10 * time.Second,
	// From the end of the request's headers to the end of the answer: a
	// scrape gathers and writes every series, the providers' included.
	write: 30 * time.Second,
	// Longer than nothing, so that a scraper or the status page (which
	// polls every second) keeps its connection between requests; short
	// enough that connections left idle give back their descriptors.
	idle:           30 * time.Second,
	maxHeaderBytes: 32 << 10,
	// A scraper or two and a few browsers showing the status page.
	maxConns: 64,
}

// Port is the metrics server's address, bound before the processor starts
// so that a taken port fails start-up before anything is changed on the
// NATS server.
type Port struct{ l net.Listener }

// Listen binds addr at once, so a taken port fails start-up with a clear
// error. Serve the port, or Close it if the processor does not start.
func Listen(addr string) (*Port, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listening on %s: %w", addr, err)
	}
	return &Port{l: l}, nil
}

// Serve serves h on the port until ctx ends, then closes it. The server
// holds at most 64 connections at once, closes one left idle for 30 s, and
// gives a request 10 s to arrive and its answer 30 s to be written.
func (p *Port) Serve(ctx context.Context, h http.Handler) error {
	return serveOn(p.l, h, defaultLimits)(ctx)
}

// Close releases a port that was never served.
func (p *Port) Close() error { return p.l.Close() }

// serveOn returns Listen's Serve function on l, with the limits lim.
func serveOn(l net.Listener, h http.Handler, lim serverLimits) func(ctx context.Context) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.readHeader,
		ReadTimeout:       lim.read,
		WriteTimeout:      lim.write,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    lim.maxHeaderBytes,
	}
	l = netutil.LimitListener(l, lim.maxConns)
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
	}
}
