package natsconn

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go"
)

// ErrLost marks a NATS connection that closed for good while it was in
// use: the client gave up reconnecting (the server refused the credentials
// twice in a row) or the server sent an error the client does not recover
// from. A processor cannot work without it and should exit, so that its
// supervisor starts it afresh.
var ErrLost = errors.New("natsconn: the NATS connection closed for good")

// Watch logs nc's disconnects (warn, with the error), reconnects (info, with
// the server's URL, credentials hidden) and the errors the client reports
// asynchronously (warn), and calls lost, once, with an error wrapping
// [ErrLost] if the connection closes. Whoever closes nc on purpose replaces
// the closed handler first, as [Conn.Close] does, or lost is called for that
// close too. Secrets of the connection's URLs never reach the log or lost's
// error. Watch replaces nc's disconnect, reconnect, error and closed
// handlers.
func Watch(nc *nats.Conn, logger *slog.Logger, lost func(error)) {
	secrets := urlSecrets(strings.Join(append([]string{nc.Opts.Url}, nc.Opts.Servers...), ","))
	nc.SetDisconnectErrHandler(func(nc *nats.Conn, err error) {
		if nc.IsClosed() {
			return // a close, not a disconnect: the closed handler speaks for it
		}
		if err == nil {
			logger.Warn("disconnected from NATS; reconnecting")
			return
		}
		logger.Warn("disconnected from NATS; reconnecting", "err", scrub(err.Error(), secrets))
	})
	nc.SetReconnectHandler(func(nc *nats.Conn) {
		// ConnectedUrlRedacted hides a password but not a token URL
		// (nats://TOKEN@host): redact both, then scrub what is left.
		logger.Info("reconnected to NATS", "url", scrub(redactURL(nc.ConnectedUrl()), secrets), "reconnects", nc.Stats().Reconnects)
	})
	nc.SetErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		// Errors the client handles itself (a slow consumer, a pull
		// consumer gone during a restart); the default prints them to
		// stderr outside the log's format.
		args := []any{"err", scrub(err.Error(), secrets)}
		if sub != nil {
			args = append(args, "subject", sub.Subject)
		}
		logger.Warn("NATS client error", args...)
	})
	nc.SetClosedHandler(func(nc *nats.Conn) {
		reason := "no error reported"
		if err := nc.LastError(); err != nil {
			reason = scrub(err.Error(), secrets)
		}
		err := fmt.Errorf("%w: %s", ErrLost, reason)
		logger.Error("NATS connection closed for good; stopping", "err", err)
		lost(err)
	})
}
