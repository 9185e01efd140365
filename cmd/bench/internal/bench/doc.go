// Package bench measures detour against a minimal JetStream pipeline on one
// machine, in one run, and judges the figures against the performance
// targets of BENCHMARKS.md, which describes its scenarios. cmd/bench runs
// it; its logic lives here, one scenario a file.
//
// Every pipeline runs as OS processes against one NATS server: the baseline
// is the bench binary itself re-run as "bench baseline" (RunBaseline, and
// RunHTTPBaseline beside the memory scenario), detour the processor binary
// with a chain file the bench writes. The bench creates the streams and
// consumers first, with the processor's default settings, so that a backlog
// (backlog.go) can be queued before any process starts. Report holds the
// figures and the targets (targets.go); WriteTable prints it, and it
// encodes as the JSON of -json.
package bench
