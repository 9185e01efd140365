// Package fleet lets processors that share a NATS agree on what each
// provider name means. Every processor announces, in the metadata of its
// micro service "detour" (one key "provider.<name>" per provider), the
// Definition it runs under that name: type, base URL, model and policy,
// with a fingerprint of them. Discover reads every running processor's
// announcement, and Conflicts finds the names that two of them define
// differently, so that a processor started with a stale chain file is
// reported instead of quietly sharing cooldowns with a different provider.
//
// Anyone on the NATS can answer a discovery, so Discover keeps a bounded
// share of what it hears (MaxResponders, MaxPerResponder, MaxDefinitions,
// MaxVariants) and drops definitions no processor announces.
//
// A Definition never holds an API key or the name of its variable, and
// its base URL is stripped of user information, query and fragment,
// where a credential could hide.
package fleet
