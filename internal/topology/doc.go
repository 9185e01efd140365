// Package topology holds what every owner of detour's JetStream resources
// (the streams and consumers of package stream, the buckets of kvstate and
// cache, the publishers of client and the ask service) needs alike: one
// reading of an error that says a resource is gone, which a repair can cure
// by creating it again, and one compare-and-set of a subject's last message
// with a fresh per-message TTL.
package topology
