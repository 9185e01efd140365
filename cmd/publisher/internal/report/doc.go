// Package report is what the publisher prints: each result as a block, what
// a run that did not wait published, and the summary of a bulk run (counts
// and nearest-rank p50/p95/p99 latencies per provider and model, as a
// table or as JSON; docs/commands.md#publisher).
//
// Everything shown comes from results or requests, which any client that
// can publish to a reply subject can forge: it is printed through
// text.Visible, so no field sends the terminal a control or breaks a line
// of the table.
package report
