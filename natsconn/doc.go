// Package natsconn owns detour's connections to NATS: dialling a server with
// the configured credentials and TLS, explaining a refused connection in an
// operator's words, keeping passwords, tokens, seeds and JWTs out of errors
// and logs, and watching a connection once it is up (disconnects and
// reconnects logged, a connection lost for good signalled).
//
// Connect dials by URL and fails within seconds rather than retry a first
// connection; ConnectClient is the client commands' connection from the
// DETOUR_* settings. A processor's connection is a Conn, from Dial or
// DialInProcess.
//
// natsconn does not link the NATS server, so that the client commands do
// not either: an in-process server is passed in as a Server interface, and
// starting one is package embedded's Start (cmd/processor/internal/embedded).
package natsconn
