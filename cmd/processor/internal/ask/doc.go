// Package ask serves request/reply: the NATS micro service "detour", with one
// endpoint per chain on detour.ask.<chain>. A core NATS request there is
// checked as a processor checks a request, then stored in DETOUR_REQUESTS
// (detour.requests.<chain>) with the requester's reply subject as its
// Detour-Reply-To, and the endpoint does not answer it: the processor that
// takes the request publishes its result to that reply subject, so the
// requester's answer is the result, and a stored request survives the
// processor that stored it. A request that is refused or cannot be stored
// gets a micro error reply at once (docs/requests.md#requestreply).
//
// Every processor adds the same service, so `nats micro ls`, `info` and
// `stats` list each running processor, and the endpoints share micro's
// queue group: one processor stores each request.
package ask
