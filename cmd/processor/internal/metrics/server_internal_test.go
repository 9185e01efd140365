package metrics

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// guard bounds each wait of these tests on the server, so that a server
// that never does what is waited for fails the test rather than hangs it.
// No test measures time with it.
const guard = 20 * time.Second

// startServer serves New's handler on a free loopback port with lim, on
// the listener l wraps (nil for none), until the test ends.
func startServer(t *testing.T, lim serverLimits, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if wrap != nil {
		l = wrap(l)
	}
	h := New().Handler(func() bool { return true })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, l, h, lim) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return addr
}

// keptAlive dials addr and reads the answer to one GET /healthz that leaves
// the connection open.
func keptAlive(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(guard)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	if _, err := fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: detour\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /healthz: %d, close %v; want 200 on a connection kept alive", resp.StatusCode, resp.Close)
	}
	return c, r
}

// TestServerClosesIdleConnections: a keep-alive connection left idle after
// its answer is closed by the server once the idle timeout passes, so that
// idle clients cannot keep the processor's descriptors.
func TestServerClosesIdleConnections(t *testing.T) {
	lim := defaultLimits
	lim.idle = 50 * time.Millisecond
	_, r := keptAlive(t, startServer(t, lim, nil))
	if b, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("reading the idle connection: %q, %v; want the server to close it (EOF)", b, err)
	}
}

// countingListener keeps the peak of the connections it accepted that are
// still open.
type countingListener struct {
	net.Listener
	mu         sync.Mutex
	open, peak int
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.open++
	l.peak = max(l.peak, l.open)
	l.mu.Unlock()
	return &countedConn{Conn: c, l: l}, nil
}

func (l *countingListener) maxOpen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.peak
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// TestServerHoldsAtMostMaxConnsConnections: with maxConns connections held
// open, the server accepts no other: a further client waits, holding no
// descriptor of the server, until one of them closes, and is then answered.
func TestServerHoldsAtMostMaxConnsConnections(t *testing.T) {
	lim := defaultLimits
	lim.maxConns = 2
	counting := &countingListener{}
	addr := startServer(t, lim, func(l net.Listener) net.Listener { counting.Listener = l; return counting })
	first, _ := keptAlive(t, addr)
	keptAlive(t, addr)

	answered := make(chan error, 1)
	go func() {
		c, err := net.DialTimeout("tcp", addr, guard)
		if err != nil {
			answered <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(guard))
		if _, err := fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: detour\r\n\r\n"); err != nil {
			answered <- err
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		answered <- err
	}()
	// A server without the bound answers at once; with it, never while
	// both connections are held, however long this waits.
	select {
	case err := <-answered:
		t.Fatalf("a third client was served (%v) while two connections were held, the bound", err)
	case <-time.After(200 * time.Millisecond):
	}
	if n := counting.maxOpen(); n > 2 {
		t.Fatalf("the server held %d connections at once, past the bound of 2", n)
	}

	first.Close()
	if err := <-answered; err != nil {
		t.Fatalf("the waiting client, once a connection closed: %v", err)
	}
	if n := counting.maxOpen(); n > 2 {
		t.Errorf("the server held %d connections at once, past the bound of 2", n)
	}
}

// TestServerRefusesOversizedHeaders: a request whose headers pass
// maxHeaderBytes is answered 431 rather than read into memory.
func TestServerRefusesOversizedHeaders(t *testing.T) {
	addr := startServer(t, defaultLimits, nil)
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Padding", strings.Repeat("a", 2*defaultLimits.maxHeaderBytes))
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("GET with %d bytes of headers: %d, want 431", 2*defaultLimits.maxHeaderBytes, resp.StatusCode)
	}
}

// panicking is a collector whose Collect panics, as one given a label value
// the registry refuses does.
type panicking struct{}

func (panicking) Describe(chan<- *prometheus.Desc) {}
func (panicking) Collect(chan<- prometheus.Metric) { panic("collector failed at source.go:1") }

// TestScrapeSurvivesAFailingCollector: a collector that panics costs its
// own series only: /metrics answers 200 with the others, sends no stack
// trace or source path, and logs the error.
func TestScrapeSurvivesAFailingCollector(t *testing.T) {
	m := New()
	m.registry.MustRegister(panicking{})
	var log bytes.Buffer
	m.SetLogger(slog.New(slog.NewTextHandler(&log, nil)))
	rec := httptest.NewRecorder()
	m.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(body, "\ndetour_in_flight 0\n") {
		t.Fatalf("/metrics: %d, want 200 with the other series:\n%s", rec.Code, body)
	}
	for _, leak := range []string{"panic", "stack trace", "[running]", "source.go", ".go:"} {
		if strings.Contains(body, leak) {
			t.Errorf("/metrics sends %q to the scraper:\n%s", leak, body)
		}
	}
	if !strings.Contains(log.String(), "serving metrics") || !strings.Contains(log.String(), "collector failed") {
		t.Errorf("the error is not logged; the log holds %q", log.String())
	}
}
