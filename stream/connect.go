package stream

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnectOptions are the client-side settings of a NATS connection.
type ConnectOptions struct {
	Name                   string
	Creds                  string
	TLSCA, TLSCert, TLSKey string
}

// Connect dials url with credentials and TLS as configured. A wrong
// credential or unreachable server fails at once with the server's reason;
// the error never contains the credentials.
func Connect(url string, o ConnectOptions) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.Timeout(5 * time.Second),
		nats.MaxReconnects(-1),
	}
	if o.Creds != "" {
		opts = append(opts, nats.UserCredentials(o.Creds))
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	if o.TLSCert != "" || o.TLSKey != "" {
		opts = append(opts, nats.ClientCert(o.TLSCert, o.TLSKey))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("stream: connecting to NATS at %s: %w", redactURL(url), err)
	}
	return nc, nil
}
