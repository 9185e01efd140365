// Package bench measures detour against a minimal JetStream pipeline on one
// machine, in one run, and judges the figures against the performance
// targets of BENCHMARKS.md. cmd/bench runs it; its logic lives here, one
// scenario a file.
//
// Every pipeline runs as OS processes against one NATS server (embedded by
// default): the baseline is the bench binary itself re-run as
// "bench baseline" (RunBaseline: pull, store a result, ack), and detour is
// the real processor binary with a chain file the bench writes, on the
// in-process rules provider or on providertest fakes the bench serves on
// loopback. The bench creates the streams and consumers first, with the
// processor's default settings, so that requests can be queued before any
// process starts.
//
// A backlog run (backlog.go) queues the requests with the consumer paused,
// starts the processes, and releases the backlog once every one is
// consuming: its throughput is the requests over the time from the release
// to the last result the bench reads back from the results stream, and its
// CPU per request the processes' user and system time over that window
// (/proc/<pid>/stat), divided by the requests. The throughput, scaling and
// outage scenarios are backlog runs; the latency scenario offers requests
// at a fixed rate (latency.go) and the memory one holds requests in flight
// on a slow provider (memory.go), beside "bench baseline -http"
// (RunHTTPBaseline), which makes as many calls with net/http alone
// (httpbaseline.go). Figures are medians of rounds, the
// pipelines of a round alternating in order (rounds in throughput.go).
//
// Report holds the figures, each round's included, and the performance
// targets with whether each holds (targets.go); WriteTable prints it, and
// it encodes as the JSON of -json.
package bench
