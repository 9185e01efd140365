// Package deadletter publishes requests that detour cannot or must not answer
// to the stream DETOUR_DEADLETTER, on detour.deadletter.<chain>, with the
// original body and headers unchanged plus Detour-DLQ-* headers that say why.
// Nothing is dropped: a request either gets a result or a dead letter.
package deadletter
