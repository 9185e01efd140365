// Package client is detour's Go client: it publishes requests to a chain
// and collects their results, over a NATS connection the caller owns.
//
// A request is a wire.Request and a result a chain.Result, the types every
// processor reads and writes (docs/requests.md, docs/results.md). There are
// two ways in:
//
//   - Publish stores a request in the DETOUR_REQUESTS stream
//     (detour.requests.<chain>), retrying a failed publish under the same
//     Nats-Msg-Id so that nothing is queued twice. The request outlives any
//     processor, and its result is stored under detour.results.<id> in
//     DETOUR_RESULTS, where Result reads it. Send publishes and waits for the
//     result in one call; PublishAll does so for many requests at once,
//     at a rate, with one subscription.
//   - Ask sends the request with NATS request/reply to detour.ask.<chain>;
//     a processor's micro endpoint stores it with the caller's inbox as its
//     reply subject, and the result is the reply. A request the endpoint
//     refuses or cannot store is answered at once with an *AskError.
//
// Either way, an error means no result came back: the request was not
// stored, or the wait ended first. A result whose Status is
// chain.StatusFailed is an answer all the same (the request expired, or was
// dead-lettered, and Error says why), returned with a nil error.
//
// A Client holds no goroutine or subscription between calls and needs no
// closing; it is safe for concurrent use.
package client
