package natsconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnectOptions are the client-side settings of a NATS connection. Empty
// fields are not used: no credentials file, the system roots for a server
// that requires TLS, no client certificate, the client's own ping interval
// (2 minutes) and pings out (2).
type ConnectOptions struct {
	Name                   string // client name, shown in the server's connection list
	Creds                  string // path of a .creds file: user JWT and nkey seed
	TLSCA, TLSCert, TLSKey string // paths of PEM files
	// PingInterval is how often the client pings the server; once more
	// than MaxPingsOut pings are unanswered, it takes the connection as
	// lost (nats.ErrStaleConnection) and reconnects. A connection the
	// network stopped carrying is noticed within (MaxPingsOut + 1) ×
	// PingInterval.
	PingInterval time.Duration
	MaxPingsOut  int
}

// connectTimeout bounds the dial and the handshake (TLS, INFO, CONNECT and
// the first PONG) with each server of the URL list, so that a server which
// accepts the connection but never answers fails Connect instead of
// hanging it.
const connectTimeout = 5 * time.Second

// ConnectError is a failed [Connect]: where it tried, what most likely went
// wrong in an operator's words, and the client's error. Its text never holds
// a password or token of the URL, nor a seed or JWT.
type ConnectError struct {
	URL    string // the server URL(s), secrets hidden
	Reason string // for example "the server rejected the credentials in /etc/detour/detour.creds"
	err    error
	// secrets of the URL, scrubbed from err's text.
	secrets []string
}

// Error says where, why, and what the client reported, secrets hidden.
func (e *ConnectError) Error() string {
	msg := "natsconn: connecting to NATS at " + e.URL
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg + ": " + scrub(e.err.Error(), e.secrets)
}

// Unwrap returns the client's error, for errors.Is(err, nats.ErrAuthorization)
// and the like. Print the ConnectError, not this: its text is not scrubbed.
func (e *ConnectError) Unwrap() error { return e.err }

// Connect dials url (one URL or a comma-separated list) with credentials and
// TLS as configured. A missing file of o, a wrong credential, an untrusted
// certificate or an unreachable server fails with a [*ConnectError] saying
// why, after at most 5 seconds per server of the list for the dial and the
// handshake; Connect never retries a first connection, so start-up cannot
// hang on a server that refuses it. Once connected, the client reconnects
// without limit. The caller closes the connection.
func Connect(url string, o ConnectOptions) (*nats.Conn, error) {
	fail := func(reason string, err error) error {
		return &ConnectError{URL: redactURL(url), Reason: reason, err: err, secrets: urlSecrets(url)}
	}
	// Name a missing file before the client reports it as a TLS or parsing
	// error, or, for the creds file, only once it has reached a server.
	for _, f := range []struct{ what, path string }{
		{"credentials file", o.Creds}, {"TLS CA file", o.TLSCA},
		{"TLS certificate file", o.TLSCert}, {"TLS key file", o.TLSKey},
	} {
		if f.path == "" {
			continue
		}
		file, err := os.Open(f.path)
		if err != nil {
			return nil, fail("cannot read the "+f.what, err)
		}
		file.Close()
	}
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.Timeout(connectTimeout),
		// Explicitly so: retrying a refused first connection in the
		// background would turn a wrong credential into a silent hang.
		nats.RetryOnFailedConnect(false),
		nats.MaxReconnects(-1),
	}
	if o.PingInterval > 0 {
		opts = append(opts, nats.PingInterval(o.PingInterval))
	}
	if o.MaxPingsOut > 0 {
		opts = append(opts, nats.MaxPingsOutstanding(o.MaxPingsOut))
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
		return nil, fail(connectReason(err, o, len(urlSecrets(url)) > 0), err)
	}
	return nc, nil
}

// clientCertAlerts are the TLS alerts a server sends when it refuses the
// client certificate or wants one (RFC 8446 §6.2).
var clientCertAlerts = []tls.AlertError{
	42,  // bad_certificate
	45,  // certificate_expired
	46,  // certificate_unknown
	48,  // unknown_ca
	116, // certificate_required
}

// clientCertRefused reports whether err is one of clientCertAlerts from the
// server. crypto/tls reports a received alert as a *net.OpError "remote
// error" around an unexported type, so the alert is known by its text.
func clientCertRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error" && op.Err != nil &&
		slices.ContainsFunc(clientCertAlerts, func(a tls.AlertError) bool { return op.Err.Error() == a.Error() })
}

// connectReason explains a failed connection in terms of the settings that
// most likely cause it; "" when the client's error says all there is.
func connectReason(err error, o ConnectOptions, urlAuth bool) string {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		netErr    net.Error
		urlErr    *neturl.Error
	)
	switch {
	case errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAccountAuthExpired):
		return "the credentials have expired"
	case errors.Is(err, nats.ErrAuthRevoked):
		return "the credentials were revoked"
	case errors.Is(err, nats.ErrAuthorization):
		switch {
		case o.Creds != "":
			return "the server rejected the credentials in " + o.Creds
		case urlAuth:
			return "the server rejected the user and password or token of the URL"
		default:
			return "the server requires credentials and none were given"
		}
	case errors.As(err, &unknownCA):
		if o.TLSCA != "" {
			return "the server's TLS certificate is not signed by the CA in " + o.TLSCA
		}
		return "the server's TLS certificate is not signed by a CA of the system (no CA file was given)"
	case errors.As(err, &hostname):
		return "the server's TLS certificate is not for the host of the URL"
	case errors.As(err, &invalid):
		return "the server's TLS certificate is not valid (expired, or not for server use)"
	case clientCertRefused(err):
		return clientCertReason("the server", o)
	case errors.Is(err, nats.ErrTLS) && (errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)):
		// With TLS 1.3 the server checks the client certificate after the
		// client's side of the handshake; the client may see its next write
		// fail, the server having closed the connection, before it reads the
		// server's alert.
		return clientCertReason("the server closed the connection after the TLS handshake: it likely", o)
	case errors.As(err, &urlErr) && urlErr.Op == "parse":
		return "the URL is malformed"
	case errors.Is(err, nats.ErrSecureConnWanted):
		return "TLS is configured but the server does not offer it"
	case errors.Is(err, nats.ErrNoServers):
		return "no server accepted a connection (is it running, and is the address right?)"
	case errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Sprintf("the server did not answer within %s", connectTimeout)
	}
	return ""
}

func clientCertReason(subject string, o ConnectOptions) string {
	if o.TLSCert == "" {
		return subject + " requires a TLS client certificate and none was given"
	}
	return subject + " refused the TLS client certificate " + o.TLSCert
}
