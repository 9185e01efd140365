// Package deadletter publishes requests that detour cannot or must not answer
// to the stream DETOUR_DEADLETTER, on detour.deadletter.<chain>, with the
// original body and headers unchanged plus Detour-DLQ-* headers that say why.
// Nothing is dropped: a request either gets a result or a dead letter.
//
// A Store lists, shows, replays and purges dead letters (`processor dlq`).
// A replay republishes the original request to detour.requests.<chain> and
// removes the dead letter only after the requests stream has acknowledged
// it, so a failed replay loses nothing; a replay id fixed per dead letter
// keeps a retried replay from queuing the request twice.
package deadletter
