// Package cache is detour's response cache: answers kept in the JetStream KV
// bucket detour_cache, under <chain>.<scope>.<fingerprint>, so that an
// identical request is answered without a provider call while an answer is
// fresh, and a stale answer can stand in when every provider is down
// (docs/cache.md).
//
// It is a package of its own, not part of kvstate, because it is about
// answers, which kvstate must not know, and not part of chain, which must
// not import NATS. Runner wraps a chain: chain stays unaware of the store
// and only reads the stale answer Runner puts on the request
// (chain.StaleAnswer), which it serves after every provider and before the
// rules provider. Identical misses in one processor at once share one chain
// run (golang.org/x/sync/singleflight).
package cache
