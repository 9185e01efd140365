// Package metrics is the processor's Prometheus instrumentation and its
// small HTTP server: /metrics, /healthz (the process is alive) and /readyz
// (whatever ready function the caller passes: for a processor, connected to
// NATS, consuming, and its topology and provider-state mirror working).
//
// It observes from outside: *Metrics implements the observer interfaces
// that stream (stream.Observer) and cache (cache.Observer) declare, so
// those packages never import it. Every method works on a nil *Metrics, so
// a processor built without metrics (tests, client commands) records
// nothing.
package metrics
