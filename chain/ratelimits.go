package chain

import (
	"net/http"
	"regexp"
	"strings"
	"time"
)

// This file reads the rate-limit windows a response reports. A reset is a
// wait hint only for a window whose remaining count is 0: providers send
// these headers on every answer, and a window with room left says nothing
// about when to call again.

// Window header families, each a remaining count paired with a reset:
//
//   - x-ratelimit-remaining<S> with x-ratelimit-reset<S>, S being "",
//     "-requests", "-tokens" (OpenAI, Groq, xAI: the reset in Go's duration
//     syntax, "6m0s", "1.5s", "20ms",
//     https://platform.openai.com/docs/guides/rate-limits, BeehiveInnovations/pal-mcp-server#178;
//     Azure OpenAI: whole seconds, https://github.com/openai/openai-dotnet/issues/838),
//     "-requests-day", "-tokens-minute" (Cerebras: seconds,
//     https://inference-docs.cerebras.ai/support/rate-limits), or none
//     (Together: seconds; OpenRouter: milliseconds since the epoch, also
//     relayed in the body, Gitlawb/openclaude#936);
//   - anthropic-ratelimit-<K>-remaining with anthropic-ratelimit-<K>-reset,
//     K being requests, tokens, input-tokens or output-tokens, the reset an
//     RFC 3339 time (https://docs.claude.com/en/api/rate-limits,
//     anthropics/anthropic-sdk-typescript#357);
//   - RateLimit-Remaining with RateLimit-Reset, delta seconds, of the IETF
//     drafts up to -06 (https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/06/),
//     and their successor, one RateLimit field of policies with r
//     (remaining) and t (reset, seconds) parameters, `"default";r=0;t=30`
//     (https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/),
//     or in draft -07 `limit=10, remaining=0, reset=7`.

// windowWait is the longest reset among the windows header reports spent.
func windowWait(header http.Header, now time.Time) time.Duration {
	var wait time.Duration
	for key, values := range header {
		reset, paired := resetKeyFor(strings.ToLower(key))
		if !paired || len(values) == 0 || !spent(values[0]) {
			continue
		}
		if d, ok := parseReset(header.Get(reset), now); ok {
			wait = max(wait, d)
		}
	}
	return max(wait, policyWait(header.Values("RateLimit")))
}

// resetKeyFor is the reset header paired with the lower-case remaining-count
// header key, if key is one.
func resetKeyFor(key string) (string, bool) {
	switch {
	case strings.HasPrefix(key, "x-ratelimit-remaining"):
		return "x-ratelimit-reset" + strings.TrimPrefix(key, "x-ratelimit-remaining"), true
	case strings.HasPrefix(key, "anthropic-ratelimit-") && strings.HasSuffix(key, "-remaining"):
		return strings.TrimSuffix(key, "-remaining") + "-reset", true
	case key == "ratelimit-remaining":
		return "ratelimit-reset", true
	}
	return "", false
}

// spent reports a remaining count of 0 ("0.0" too), not Azure's unknown -1.
func spent(remaining string) bool {
	n, ok := parseDecimal(strings.TrimSpace(remaining), time.Second)
	return ok && n == 0
}

// goDuration is a positive duration in Go's syntax ("6m0s", "20ms").
var goDuration = regexp.MustCompile(`^(?:\d{1,20}(?:\.\d{1,20})?(?:ns|us|µs|ms|s|m|h))+$`)

// parseReset reads a window's reset in any form the families above write:
// a Go duration, an RFC 3339 or HTTP date, seconds (decimals allowed), or a
// time since the epoch in seconds (10 to 12 digits; no delta is 31 years)
// or milliseconds (13 or more). A reset in the past is no wait.
func parseReset(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if goDuration.MatchString(value) {
		d, err := time.ParseDuration(value)
		if err != nil {
			return maxHint, true // well formed but beyond a Duration
		}
		return min(d, maxHint), true
	}
	if t, err := time.Parse(time.RFC3339, value); err == nil {
		return until(t, now), true
	}
	if t, err := http.ParseTime(value); err == nil {
		return until(t, now), true
	}
	whole, _, _ := strings.Cut(value, ".")
	if !allDigits(whole) {
		return 0, false
	}
	switch digits := len(strings.TrimLeft(whole, "0")); {
	case digits > 18:
		return maxHint, true // beyond any epoch a time.Time adds up
	case digits >= 13:
		ms, _ := parseDecimal(whole, 1)
		return until(time.UnixMilli(int64(ms)), now), true
	case digits >= 10:
		secs, _ := parseDecimal(whole, 1)
		return until(time.Unix(int64(secs), 0), now), true
	}
	return parseDecimal(value, time.Second)
}

// until is the wait from now to t: none when t has passed, maxHint at most.
func until(t, now time.Time) time.Duration { return min(max(t.Sub(now), 0), maxHint) }

// maxPolicies bounds the policies of RateLimit fields read.
const maxPolicies = 64

// policyWait is the longest reset among the spent policies of RateLimit
// fields, in either form of the drafts above.
func policyWait(fields []string) time.Duration {
	var wait time.Duration
	read := 0
	for _, field := range fields {
		dict := map[string]string{}
		for member := range strings.SplitSeq(field, ",") {
			if read++; read > maxPolicies {
				return wait
			}
			params := map[string]string{}
			for i, part := range strings.Split(member, ";") {
				key, value, ok := strings.Cut(strings.TrimSpace(part), "=")
				if !ok {
					continue
				}
				key = strings.ToLower(strings.TrimSpace(key))
				if i == 0 {
					dict[key] = value
				} else {
					params[key] = value
				}
			}
			if d, ok := parseDecimal(strings.TrimSpace(params["t"]), time.Second); ok && spent(params["r"]) {
				wait = max(wait, d)
			}
		}
		if d, ok := parseDecimal(strings.TrimSpace(dict["reset"]), time.Second); ok && spent(dict["remaining"]) {
			wait = max(wait, d)
		}
	}
	return wait
}
