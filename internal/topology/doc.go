// Package topology owns the JetStream resources detour creates and repairs:
// the requests, results and dead-letter streams with one durable consumer
// per chain (Ensure, and a Repairer that puts back what an operator or a
// lost store took away), and the provider and cache buckets (OpenBucket).
// Beside them it holds what every user of those resources needs alike: one
// reading of an error that says a resource is gone (Gone), which a repair
// cures by creating it again, and one compare-and-set of a subject's last
// message with a fresh per-message TTL (Replace).
//
// Their settings and why each is what it is are in docs/state.md and
// docs/requests.md ("Subjects and streams").
package topology
