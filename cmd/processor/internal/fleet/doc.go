// Package fleet lets processors that share a NATS agree on what each
// provider and chain name means. Every processor records in the provider
// bucket (kvstate.Store.Record, key <processor>.running) its Instance: the
// Definition it runs under each provider name (type, base URL, model and
// policy, with a fingerprint of them) and each chain's providers in
// fallback order. Instances reads the records a mirror holds, Running those
// in the bucket; Conflicts finds the provider names that two processors
// define differently, and ChainConflicts the chain names they run with
// different providers, so that a processor started with a stale chain file
// is reported. Each definition of a provider name keeps a circuit of its
// own in the provider bucket (kvstate.Circuit), which WithCircuits names
// beside it.
//
// A Definition never holds an API key or the name of its variable, and
// its base URL is stripped of user information, query and fragment,
// where a credential could hide.
package fleet
