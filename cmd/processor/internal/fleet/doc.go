// Package fleet lets processors that share a NATS agree on what each
// provider and chain name means. Every processor announces, in the
// metadata of its micro service "detour", the Definition it runs under
// each provider name (one key "provider.<name>"): type, base URL, model
// and policy, with a fingerprint of them; and each chain's providers in
// fallback order (one key "chain.<name>"). Discover reads every running
// processor's announcement; Conflicts finds the provider names that two of
// them define differently, and ChainConflicts the chain names they run
// with different providers, so that a processor started with a stale
// chain file is reported. Each definition of a provider name keeps a
// circuit of its own in the provider bucket (kvstate.Circuit), which
// WithCircuits names beside it.
//
// Anyone on the NATS can answer a discovery, so Discover keeps a bounded
// share of what it hears (MaxResponders, MaxPerResponder, MaxDefinitions,
// MaxVariants, MaxChainLength) and drops definitions and chains no
// processor announces.
//
// A Definition never holds an API key or the name of its variable, and
// its base URL is stripped of user information, query and fragment,
// where a credential could hide.
package fleet
