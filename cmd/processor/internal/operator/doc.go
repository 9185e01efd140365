// Package operator is what `processor reset` and `processor trip` do: an
// operator ending a provider's outage, or opening a cooldown of their own
// (for maintenance), for the whole fleet at once. It checks the request
// against the chain file (a provider it names, a length processors will
// honour), writes through kvstate's compare-and-set transitions on the
// bucket detour_providers, and says what it did in one line per provider.
// Every processor's mirror follows the bucket, so what is written here is
// honoured everywhere within one watch delivery, and each processor logs
// the operator's act as it sees it.
package operator
