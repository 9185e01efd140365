// Package natsconn owns detour's connections to NATS: dialling a server with
// the configured credentials and TLS, explaining a refused connection in an
// operator's words, keeping passwords, tokens, seeds and JWTs out of errors
// and logs, and watching a connection once it is up (disconnects and
// reconnects logged, a connection lost for good signalled).
//
// Connect is the one way to dial a server by URL. It fails within seconds,
// with a *ConnectError saying why, rather than retrying a first connection;
// once connected, the client reconnects without limit. Watch logs what
// happens to a connection afterwards and reports, once, a close for good as
// an error wrapping ErrLost.
//
// Two callers build on them. ConnectClient is the client commands'
// connection (publisher, status, watch, dlq) from the DETOUR_* settings.
// A processor's connection is a Conn, from Dial (DETOUR_NATS_URL) or
// DialInProcess (the embedded server the processor started): watched, with
// Lost for a close for good and a Close that drains before it stops the
// embedded server.
//
// natsconn does not link the NATS server, so that the client commands do
// not either: an in-process server is passed in as a Server interface, and
// starting one is package stream's StartEmbedded.
package natsconn
