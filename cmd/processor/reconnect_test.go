package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/natstest"
)

// Credentials of the servers below. The password must never appear in the
// processor's output.
const (
	natsUser     = "detour"
	natsPassword = "s3cret-pw"
)

// restartableServer is a NATS server that the test stops and starts again
// on the same port and store, as an operator restarting it would.
type restartableServer struct {
	port     int
	storeDir string
}

// start runs the server with password; the first start picks a free port.
func (r *restartableServer) start(t *testing.T, password string) *server.Server {
	t.Helper()
	if r.storeDir == "" {
		r.storeDir = t.TempDir()
	}
	port := r.port
	if port == 0 {
		port = -1
	}
	srv := natstest.StartWith(t, &server.Options{Port: port, StoreDir: r.storeDir, Username: natsUser, Password: password})
	r.port = srv.Addr().(*net.TCPAddr).Port
	return srv
}

// url is the server's URL with the credentials in it.
func (r *restartableServer) url() string {
	return fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", natsUser, natsPassword, r.port)
}

// stop shuts the server down and waits until it is gone.
func stopServer(srv *server.Server) {
	srv.Shutdown()
	srv.WaitForShutdown()
}

// startRulesProcessor starts the processor binary on url with a chain that
// only the rules answer, and waits until it consumes.
func startRulesProcessor(t *testing.T, url string, settings ...string) *process {
	t.Helper()
	chainFile := filepath.Join(t.TempDir(), "detour.yaml")
	if err := os.WriteFile(chainFile, []byte(rulesChain), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, buildProcessor(t), "P", processorEnv(t, url, chainFile, settings...))
	waitConsuming(t, p)
	return p
}

// askAndWait publishes request id on a connection of its own and waits up to
// timeout for its result in DETOUR_RESULTS.
func askAndWait(t *testing.T, url, id string, timeout time.Duration, p *process) chain.Result {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := publishRequest(ctx, js, id); err != nil {
		t.Fatal(err)
	}
	for {
		res, err := resultInStream(ctx, js, id)
		if err == nil {
			return res
		}
		if ctx.Err() != nil || p.exited() {
			t.Fatalf("no result for %s within %s (processor exited: %v): %v\noutput:\n%s", id, timeout, p.exited(), err, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestProcessorRidesOutServerRestart: the NATS server the processor uses
// goes away and comes back on the same address and store. The processor logs
// the disconnect with its error and the reconnect with the server's URL
// (password hidden), answers the next request, and on SIGTERM logs the start
// and end of its shutdown and exits 0.
func TestProcessorRidesOutServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the processor and runs it as an OS process")
	}
	rs := &restartableServer{}
	srv := rs.start(t, natsPassword)
	p := startRulesProcessor(t, rs.url(), "DETOUR_SHUTDOWN_TIMEOUT=2s")
	if res := askAndWait(t, rs.url(), "before", 20*time.Second, p); res.Status != chain.StatusOK {
		t.Fatalf("before the restart: %+v", res)
	}

	stopServer(srv)
	waitUntil(t, 20*time.Second, "the processor to log the disconnect", func() bool {
		return strings.Contains(p.out.String(), "disconnected from NATS")
	}, p)
	rs.start(t, natsPassword)
	waitUntil(t, 30*time.Second, "the processor to reconnect", func() bool {
		return strings.Contains(p.out.String(), "reconnected to NATS")
	}, p)
	if res := askAndWait(t, rs.url(), "after", 30*time.Second, p); res.Status != chain.StatusOK {
		t.Fatalf("after the restart: %+v", res)
	}

	p.stop(t, 2*time.Second+10*time.Second)
	out := p.out.String()
	for _, want := range []string{
		"disconnected from NATS; reconnecting",
		fmt.Sprintf("url=nats://%s:xxxxx@127.0.0.1:%d", natsUser, rs.port),
		"shutting down",
		"shutdown complete",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, natsPassword) {
		t.Errorf("the output holds the password:\n%s", out)
	}
}

// TestProcessorExitsWhenItsConnectionCloses: the server comes back with
// other credentials, so the client stops reconnecting and closes the
// connection for good. A processor without NATS can do nothing; it must not
// linger as if healthy, but exit non-zero saying why, so that its supervisor
// restarts it.
func TestProcessorExitsWhenItsConnectionCloses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the processor and runs it as an OS process")
	}
	rs := &restartableServer{}
	srv := rs.start(t, natsPassword)
	p := startRulesProcessor(t, rs.url(), "DETOUR_SHUTDOWN_TIMEOUT=2s")

	stopServer(srv)
	rs.start(t, "another-password")
	start := time.Now()
	code, exited := p.exitCode(60 * time.Second)
	if !exited {
		p.signal(t, syscall.SIGKILL)
		t.Fatalf("processor still running 60s after its credentials were refused; output:\n%s", p.out.String())
	}
	out := p.out.String()
	t.Logf("exit %d after %v", code, time.Since(start).Round(time.Millisecond))
	if code == 0 {
		t.Errorf("processor exited 0 after losing its connection; output:\n%s", out)
	}
	mustSay(t, out, "NATS connection closed for good", "authorization violation", "processor stopped")
	if strings.Contains(out, natsPassword) {
		t.Errorf("the output holds the password:\n%s", out)
	}
}
