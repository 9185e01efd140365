// Package metrics is detour's Prometheus instrumentation and its small HTTP
// server: /metrics, /healthz (the process is alive) and /readyz (whatever
// ready function the caller passes: for a processor, connected to NATS,
// consuming, and its topology and provider-state mirror working). Every
// method works on a nil *Metrics, so a processor built without metrics
// (tests, client commands) records nothing.
package metrics
