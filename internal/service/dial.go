package service

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/natsconn"
	"github.com/detourhq/detour/stream"
)

// Conn is the processor's NATS connection and, when DETOUR_NATS_URL is empty,
// the embedded server it runs on.
type Conn struct {
	*nats.Conn
	embedded *server.Server
	lost     chan error // receives why, should the connection close for good
}

// Dial connects as the settings say: to DETOUR_NATS_URL, or to an embedded
// server it starts on DETOUR_LISTEN with its store in dataDir. Either way the
// client reconnects without limit, and disconnects and reconnects are logged.
func Dial(s config.Settings, dataDir, name string, logger *slog.Logger) (*Conn, error) {
	c := &Conn{lost: make(chan error, 1)}
	opts := connectOptions(s, name)
	if s.NATSURL != "" {
		nc, err := natsconn.Connect(s.NATSURL, opts)
		if err != nil {
			return nil, err
		}
		c.Conn = nc
	} else {
		srv, err := stream.StartEmbedded(s.Listen, dataDir)
		if err != nil {
			return nil, err
		}
		logger.Info("embedded NATS server started", "listen", s.Listen, "data_dir", dataDir)
		nc, err := nats.Connect(srv.ClientURL(), nats.Name(name), nats.InProcessServer(srv), nats.MaxReconnects(-1))
		if err != nil {
			srv.Shutdown()
			return nil, fmt.Errorf("service: connecting to the embedded server: %w", err)
		}
		c.Conn, c.embedded = nc, srv
	}
	natsconn.Watch(c.Conn, logger, func(err error) { c.lost <- err })
	return c, nil
}

// Lost receives, once, why the connection closed for good, if it does
// other than by Close. The client reconnects without limit, so this is a
// refusal it does not retry (credentials refused twice in a row) or a
// protocol error; the processor cannot go on without NATS.
func (c *Conn) Lost() <-chan error { return c.lost }

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
func connectOptions(s config.Settings, name string) natsconn.ConnectOptions {
	return natsconn.ConnectOptions{Name: name, Creds: s.NATSCreds, TLSCA: s.NATSTLSCA, TLSCert: s.NATSTLSCert, TLSKey: s.NATSTLSKey}
}

// ConnectClient connects a client command (publisher, status, watch, dlq)
// to DETOUR_NATS_URL or, when that is empty, to a local processor's embedded
// server on DETOUR_LISTEN, with the same credentials and TLS as a processor.
func ConnectClient(s config.Settings, name string) (*nats.Conn, error) {
	nc, err := natsconn.Connect(s.ClientURL(), connectOptions(s, name))
	if errors.Is(err, nats.ErrNoServers) {
		err = fmt.Errorf("%w\n(is a processor running? try `go run ./cmd/processor -demo`)", err)
	}
	return nc, err
}
