package embedded

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyLimit bounds how long Start waits for the server to
// take connections; readyPoll is how often it looks meanwhile, and
// so how soon it notices that its context ended.
const (
	readyLimit = 10 * time.Second
	readyPoll  = 100 * time.Millisecond
)

// ErrListenInUse reports that another process listens on the embedded
// server's address: another processor's embedded server, or a NATS server.
var ErrListenInUse = errors.New("address in use")

// CheckListen checks that an embedded server could listen on listen
// (host:port) now, by listening there and closing at once: a busy address
// fails in a moment, before anything is created. The error wraps
// ErrListenInUse when another process listens there.
func CheckListen(listen string) error {
	l, err := net.Listen("tcp", listen)
	if errors.Is(err, syscall.EADDRINUSE) {
		err = ErrListenInUse
	}
	if err != nil {
		return fmt.Errorf("stream: embedded server address %s: %w", listen, err)
	}
	return l.Close()
}

// Start starts a NATS server with JetStream in this process, storing
// in dataDir and listening on listen (host:port) so other clients, such as
// the publisher or the nats CLI, can connect. It first checks the address
// as CheckListen does, so a busy one fails at once and creates nothing (not
// even dataDir). It fails if listen is not host:port, if the server is not
// ready for connections within 10 seconds, or, with ctx's error, if ctx
// ends first (a stop signal during start-up); the server is shut down then.
// Shut it down with Shutdown/WaitForShutdown after the processor's
// connection has drained; natsconn.DialInProcess hands that to the
// connection's Close.
func Start(ctx context.Context, listen, dataDir string) (*server.Server, error) {
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("stream: embedded server address %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("stream: embedded server port %q: %w", portText, err)
	}
	if err := CheckListen(listen); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := server.NewServer(&server.Options{
		ServerName: "detour-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   dataDir,
		NoSigs:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("stream: embedded server: %w", err)
	}
	go s.Start()
	for limit := time.Now().Add(readyLimit); !s.ReadyForConnections(readyPoll); {
		if ctx.Err() != nil || time.Now().After(limit) {
			s.Shutdown()
			s.WaitForShutdown()
			return nil, cmp.Or(ctx.Err(), fmt.Errorf("stream: embedded server on %s did not start within %s", listen, readyLimit))
		}
	}
	return s, nil
}
