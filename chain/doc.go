// Package chain is detour's fallback engine: it walks an ordered list of
// providers for one request and returns the first valid answer, annotated with
// every attempt that led to it.
//
// Order of evaluation, for each provider of the chain in turn:
//
//  1. A provider that State does not admit is skipped (attempt class
//     "cooldown"): it is cooling, or it is half-open and another worker holds
//     its one probe. No call is made and no network round trip is needed.
//  2. Otherwise it is called with a per-attempt timeout. A failure is mapped to
//     a Class once, by Classify/classifyError, and the class alone decides what
//     happens next (see Class.Retryable and Class.Counts).
//  3. Retryable failures are retried up to MaxRetries times with exponential
//     backoff and full jitter, waiting at least any Retry-After the provider
//     sent. Before every retry the state is read again: once the provider is
//     cooling, no further call goes to it, not even the retry this request
//     had planned.
//  4. A 2xx answer is validated (ended the way its API documents a
//     complete answer, non-empty, satisfying the request's response_schema
//     if it has one) before it wins; an invalid answer moves on to the next
//     provider without counting as an outage. One ended by an error object
//     is the failure that object names, and counts as such.
//  5. A rules template at the end answers whatever outages left unanswered,
//     but never a request that every called provider rejected as malformed.
//     When every provider but the rules one did (a poison request), that is
//     ExhaustedError.Poison; when some were skipped for a cooldown and have
//     not judged it, ExhaustedError.Undecided: the caller waits for their
//     reopen and asks again.
//  6. A request carrying a StaleAnswer (from the response cache) still within
//     its window gets it, degraded, when every provider before the rules
//     provider failed or was skipped, in place of the rules reply (or of
//     ExhaustedError in a chain without one); a poison request never does.
//
// chain never imports NATS: it declares the narrow State interface it needs,
// and package kvstate implements it on a JetStream KV bucket.
package chain
