// Package ask serves request/reply: the NATS micro service "detour", with one
// endpoint per chain on detour.ask.<chain>. A request there is checked as a
// processor checks one, then stored in DETOUR_REQUESTS with the requester's
// reply subject as its Detour-Reply-To, unanswered: the processor that takes
// it publishes the result there, so the answer is the result. A request
// refused or not stored gets a micro error reply at once
// (docs/requests.md#requestreply).
//
// Every processor adds the same service, so `nats micro ls` lists each, and
// the endpoints share micro's queue group: one processor stores a request.
package ask
