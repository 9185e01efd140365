package service

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/stream"
)

// Conn is the processor's NATS connection and, when DETOUR_NATS_URL is empty,
// the embedded server it runs on.
type Conn struct {
	*nats.Conn
	embedded *server.Server
}

// Dial connects as the settings say: to DETOUR_NATS_URL, or to an embedded
// server it starts on DETOUR_LISTEN with its store in dataDir.
func Dial(s config.Settings, dataDir, name string, logger *slog.Logger) (*Conn, error) {
	opts := connectOptions(s, name)
	if s.NATSURL != "" {
		nc, err := stream.Connect(s.NATSURL, opts)
		if err != nil {
			return nil, err
		}
		return &Conn{Conn: nc}, nil
	}
	srv, err := stream.StartEmbedded(s.Listen, dataDir)
	if err != nil {
		return nil, err
	}
	logger.Info("embedded NATS server started", "listen", s.Listen, "data_dir", dataDir)
	nc, err := nats.Connect(srv.ClientURL(), nats.Name(name), nats.InProcessServer(srv))
	if err != nil {
		srv.Shutdown()
		return nil, fmt.Errorf("service: connecting to the embedded server: %w", err)
	}
	return &Conn{Conn: nc, embedded: srv}, nil
}

// Close drains the connection (pending acks and publishes are flushed), then
// stops the embedded server, if any, last.
func (c *Conn) Close() {
	done := make(chan struct{})
	c.SetClosedHandler(func(*nats.Conn) { close(done) })
	if err := c.Drain(); err == nil {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	}
	c.Conn.Close()
	if c.embedded != nil {
		c.embedded.Shutdown()
		c.embedded.WaitForShutdown()
	}
}

// connectOptions maps the DETOUR_NATS_* credential and TLS settings.
func connectOptions(s config.Settings, name string) stream.ConnectOptions {
	return stream.ConnectOptions{Name: name, Creds: s.NATSCreds, TLSCA: s.NATSTLSCA, TLSCert: s.NATSTLSCert, TLSKey: s.NATSTLSKey}
}

// ConnectClient connects a client command (publisher, status, watch, dlq)
// to DETOUR_NATS_URL or, when that is empty, to a local processor's embedded
// server on DETOUR_LISTEN, with the same credentials and TLS as a processor.
func ConnectClient(s config.Settings, name string) (*nats.Conn, error) {
	nc, err := stream.Connect(s.ClientURL(), connectOptions(s, name))
	if errors.Is(err, nats.ErrNoServers) {
		err = fmt.Errorf("%w\n(is a processor running? try `go run ./cmd/processor -demo`)", err)
	}
	return nc, err
}
