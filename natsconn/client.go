package natsconn

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/config"
)

// connectOptions maps the DETOUR_NATS_* credential, TLS and ping settings.
func connectOptions(s config.Settings, name string) ConnectOptions {
	return ConnectOptions{Name: name, Creds: s.NATSCreds, TLSCA: s.NATSTLSCA, TLSCert: s.NATSTLSCert, TLSKey: s.NATSTLSKey,
		PingInterval: s.NATSPingInterval, MaxPingsOut: s.NATSMaxPingsOut}
}

// ConnectClient connects a client command (publisher, status, watch, dlq)
// to DETOUR_NATS_URL or, when that is empty, to a local processor's embedded
// server on DETOUR_LISTEN, with the same credentials and TLS as a processor,
// as [Connect] does: errors.As finds a [*ConnectError] in its error, which,
// when no server answered, also suggests starting a processor. The caller
// closes the connection.
func ConnectClient(s config.Settings, name string) (*nats.Conn, error) {
	nc, err := Connect(s.ClientURL(), connectOptions(s, name))
	if errors.Is(err, nats.ErrNoServers) {
		err = fmt.Errorf("%w\n(is a processor running? try `go run ./cmd/processor -demo`)", err)
	}
	return nc, err
}
