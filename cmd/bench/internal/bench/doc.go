// Package bench measures detour against a minimal JetStream pipeline on one
// machine, in one run, and judges the figures against the performance
// targets of BENCHMARKS.md. cmd/bench runs it; its logic lives here, one
// scenario a file.
//
// Every pipeline runs as OS processes against one NATS server (embedded by
// default): the baseline is the bench binary itself re-run as
// "bench baseline" (RunBaseline; with -http, RunHTTPBaseline beside the
// memory scenario), and detour is the real processor binary with a chain
// file the bench writes, on the in-process rules provider or on
// providertest fakes the bench serves on loopback. The bench creates the
// streams and consumers first, with the processor's default settings, so
// that requests can be queued before any process starts.
//
// The throughput, scaling and outage scenarios are backlog runs
// (backlog.go), measured from the release of a paused consumer to the last
// result read back; the latency scenario offers requests at a fixed rate,
// and the memory one holds them in flight on a slow provider. Report holds
// the figures and the targets (targets.go); WriteTable prints it, and it
// encodes as the JSON of -json.
package bench
