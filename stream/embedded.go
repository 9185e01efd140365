package stream

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartEmbedded starts a NATS server with JetStream in this process, storing
// in dataDir and listening on listen (host:port) so other clients, such as
// the publisher or the nats CLI, can connect. It fails if listen is not
// host:port, or if the server is not ready for connections within 10
// seconds (for example, the address is in use). Shut it down with
// Shutdown/WaitForShutdown after the processor's connection has drained;
// natsconn.DialInProcess hands that to the connection's Close.
func StartEmbedded(listen, dataDir string) (*server.Server, error) {
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("stream: embedded server address %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("stream: embedded server port %q: %w", portText, err)
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
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("stream: embedded server on %s did not start (is the address in use?)", listen)
	}
	return s, nil
}
