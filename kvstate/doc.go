// Package kvstate keeps provider health in the JetStream KV bucket
// detour_providers and implements chain.State on it; docs/state.md says
// which keys it writes, when, and what they hold.
//
// Every processor holds a local mirror of the bucket, fed by a watcher, so
// deciding whether to skip a provider costs no network round trip. It
// applies its own successful writes to its mirror at once instead of
// waiting for the watcher.
//
// The mirror is only as good as its watch, and a watch can end without a
// word: a bucket deleted and created anew leaves the watcher waiting for
// revisions of the old one. Store.Run checks the bucket every second and
// watches again when it is gone, created anew or the connection re-established,
// recreating the bucket if need be and reloading the mirror from scratch;
// Store.Following reports whether the mirror follows, for readiness. A write
// that finds the bucket gone recreates it and is tried on the new one.
//
// The keys are by circuit: a provider's name, or, for a definition of it
// other than the one that holds the name (<provider>.definition, see
// Holder), <provider>=<short fingerprint> (Circuit). Every method that
// takes a provider takes a circuit; the processor maps each provider name
// to its definition's circuit.
//
// kvstate knows nothing of messages or chains beyond chain's State contract.
package kvstate
