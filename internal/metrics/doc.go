// Package metrics is detour's Prometheus instrumentation and its small HTTP
// server: /metrics, /healthz (the process is alive) and /readyz (connected to
// NATS and consuming). Every method works on a nil *Metrics, so a processor
// built without metrics (tests, client commands) records nothing.
package metrics
