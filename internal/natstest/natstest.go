package natstest

import (
	"cmp"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Start runs a JetStream-enabled server on a random loopback port for the
// duration of the test.
func Start(t testing.TB) *server.Server {
	t.Helper()
	return StartWith(t, &server.Options{})
}

// StartWith runs a server with opts, filling in JetStream, a temp store, a
// random port and no signal handlers.
func StartWith(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	opts.JetStream = true
	if opts.StoreDir == "" {
		opts.StoreDir = t.TempDir()
	}
	opts.Host, opts.Port = cmp.Or(opts.Host, "127.0.0.1"), cmp.Or(opts.Port, -1)
	opts.NoSigs = true
	s, err := server.NewServer(opts)
	fatalIf(t, "new server")(err)
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("natstest: server did not become ready")
	}
	t.Cleanup(func() { Stop(s) })
	return s
}

// Connect opens a client connection to s, closed in cleanup.
func Connect(t testing.TB, s *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return ConnectWith(t, s.ClientURL())
}

// ConnectWith opens a client connection to url with opts, closed in cleanup,
// for servers that [Connect] cannot reach without credentials or TLS.
func ConnectWith(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.Timeout(5 * time.Second)}, opts...)...)
	fatalIf(t, "connect")(err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	fatalIf(t, "jetstream")(err)
	return nc, js
}
