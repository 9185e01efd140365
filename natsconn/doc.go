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
// natsconn does not link the NATS server: the publisher and the other client
// commands import it.
package natsconn
