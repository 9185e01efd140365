// Package natstest starts real embedded NATS servers with JetStream for tests,
// in the spirit of net/http/httptest: a temp store, a random port, shut down
// in cleanup.
package natstest
