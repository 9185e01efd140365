package natsconn

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/config"
)

// drainTimeout bounds how long [Conn.Close] waits for the drain before it
// closes the connection anyway.
const drainTimeout = 10 * time.Second

// Server is a NATS server running in this process, such as the embedded
// one a processor starts when DETOUR_NATS_URL is empty; nats-server's
// *server.Server satisfies it. It is an interface so that this package, and
// the client commands that import it, do not link the server.
type Server interface {
	nats.InProcessConnProvider
	ClientURL() string // the server's client URL, as nats://host:port
	Shutdown()         // stops the server
	WaitForShutdown()  // returns once the server has stopped
}

// Conn is a processor's NATS connection, watched as [Watch] does, together
// with the in-process server it runs on, if any. Use [Conn.NATS] for the
// client connection and [Conn.Lost] to learn that it closed for good;
// [Conn.Close] drains it and stops the server.
type Conn struct {
	nc     *nats.Conn
	server Server     // nil when connected by URL
	lost   chan error // receives why, should the connection close for good
}

// Dial connects a processor to DETOUR_NATS_URL with the credentials and TLS
// of s, as [Connect] does (a failure is a [*ConnectError]), and watches the
// connection. An empty s.NATSURL is an error: a processor without one
// starts its embedded server and calls [DialInProcess].
func Dial(s config.Settings, name string, logger *slog.Logger) (*Conn, error) {
	if s.NATSURL == "" {
		return nil, errors.New("natsconn: no NATS URL to dial (DETOUR_NATS_URL is empty)")
	}
	nc, err := Connect(s.NATSURL, connectOptions(s, name))
	if err != nil {
		return nil, err
	}
	return watch(nc, nil, logger), nil
}

// DialInProcess connects to srv, a server in this process, without a
// socket. The client reconnects without limit, and disconnects and
// reconnects are logged. The Conn owns srv from then on: its Close shuts
// srv down, and so does a failed DialInProcess, whose error wraps the
// client's.
func DialInProcess(srv Server, name string, logger *slog.Logger) (*Conn, error) {
	nc, err := nats.Connect(srv.ClientURL(), nats.Name(name), nats.InProcessServer(srv), nats.MaxReconnects(-1))
	if err != nil {
		srv.Shutdown()
		return nil, fmt.Errorf("natsconn: connecting to the embedded server: %w", err)
	}
	return watch(nc, srv, logger), nil
}

func watch(nc *nats.Conn, srv Server, logger *slog.Logger) *Conn {
	c := &Conn{nc: nc, server: srv, lost: make(chan error, 1)}
	Watch(nc, logger, func(err error) { c.lost <- err })
	return c
}

// URL is the URL of the server the connection is connected to now, with
// its credentials hidden (a password, or a token), for logs.
func (c *Conn) URL() string {
	return scrub(redactURL(c.nc.ConnectedUrl()), urlSecrets(strings.Join(append([]string{c.nc.Opts.Url}, c.nc.Opts.Servers...), ",")))
}

// NATS returns the client connection, for JetStream and the processor's
// publishes. Its owner is the Conn: close the Conn, not this.
func (c *Conn) NATS() *nats.Conn { return c.nc }

// Lost receives, once, why the connection closed for good, if it does
// other than by Close: an error wrapping [ErrLost].
func (c *Conn) Lost() <-chan error { return c.lost }

// Close drains the connection, so that pending acks and publishes are
// flushed, waiting for the drain up to 10 seconds; closes it; then stops
// the in-process server, if any, last, and waits until it has stopped.
// Lost receives nothing for this close. Call Close once.
func (c *Conn) Close() {
	done := make(chan struct{})
	c.nc.SetClosedHandler(func(*nats.Conn) { close(done) })
	if err := c.nc.Drain(); err == nil {
		select {
		case <-done:
		case <-time.After(drainTimeout):
		}
	}
	c.nc.Close()
	if c.server != nil {
		c.server.Shutdown()
		c.server.WaitForShutdown()
	}
}
