// Package publisher is the publisher's engine: it publishes requests to
// detour and collects their results. cmd/publisher runs it; it is kept here
// so it can be tested against a real server, and it imports only what a
// client needs (chain, wire), not the processor.
//
// A run has four parts, one file each: ReadRequests turns a JSON Lines file
// into requests, checked the way a processor checks them so that a bad line
// stops the run before anything is sent; a Pacer spaces the publishes at a
// fixed rate; Client.Run publishes and collects; Summarize reduces the
// outcomes to counts and latency percentiles per provider and model.
// ReadSamples reads the same files as chain requests, for the processor's
// check command, which sends them to each provider directly.
//
// Results arrive on a private inbox (or on the reply subject a request
// names); any that were missed (the client subscribed late, a reply was lost,
// the request was a duplicate of one sent earlier) are read back from
// DETOUR_RESULTS, where every result is stored.
package publisher
