// Package providertest is a fake LLM provider over real HTTP, in the spirit of
// net/http/httptest: tests point detour's openai and anthropic adapters at it,
// and the processor's -demo mode uses it as its local providers, so it needs
// no *testing.T.
//
// A Server speaks one Flavor on its completion endpoint and answers each
// request as its Script says. Scripts compose (Sequence, FailFirst, Flaky,
// Until, WithHeader), and between them produce every failure the chain
// classifies, in the shape each service or gateway sends it (docs/go.md
// lists them).
//
// The server counts what it receives (Requests, InFlight) and keeps a copy of
// every decoded request (Received), headers, raw body and arrival time
// included, so tests can assert that a cooling provider was not called, how
// long a client waited before retrying, and that adapters send what the real
// APIs expect.
package providertest
