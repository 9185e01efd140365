// Package providertest is a fake LLM provider over real HTTP, in the spirit of
// net/http/httptest: tests point detour's openai and anthropic adapters at it,
// and the processor's -demo mode uses it as its local providers, so it needs
// no *testing.T.
//
// A Server speaks one Flavor on its completion endpoint (OpenAI's
// POST {URL}/chat/completions or Anthropic's POST {URL}/messages) and answers
// each request as its Script says. Scripts compose: Sequence, FailFirst,
// Flaky and Until choose which script answers request n, WithHeader adds a
// header to any of them, and the leaves say what the answer is. Every
// failure the chain classifies can be produced: 5xx and 529, 429 with each
// form of Retry-After, 4xx, a hang until the client's timeout, 2xx answers
// that are empty, truncated, filtered, refused, ended by an error or with no
// stop reason, or not JSON, error documents in each flavour's shape or a
// gateway's (ErrorShape), with 200 or inside an array, and a proxy's HTML
// error page.
//
// The server counts what it receives (Requests, InFlight) and keeps a copy of
// every decoded request (Received), headers, raw body and arrival time
// included, so tests can assert that a cooling provider was not called, how
// long a client waited before retrying, and that adapters send what the real
// APIs expect.
package providertest
