package chain

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWaitHintIsTheLongest: every hint is read and the longest wins.
func TestWaitHintIsTheLongest(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	google := decodeErrorBody([]byte(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}`))
	openAI := func(msg string) upstreamError { return upstreamError{found: true, message: msg} }
	tests := []struct {
		name   string
		header http.Header
		body   upstreamError
		want   time.Duration
	}{
		{"none", nil, upstreamError{}, 0},
		{"decimal Retry-After rounds up", http.Header{"Retry-After": {"2.5"}}, upstreamError{}, 3 * time.Second},
		{"retry-after-ms", http.Header{"Retry-After-Ms": {"3000"}}, upstreamError{}, 3 * time.Second},
		{"retry-after-ms with a fraction", http.Header{"Retry-After-Ms": {"1.5"}}, upstreamError{}, 1500 * time.Microsecond},
		{"ms longer than seconds", http.Header{"Retry-After": {"2"}, "Retry-After-Ms": {"3500"}}, upstreamError{}, 3500 * time.Millisecond},
		{"seconds longer than ms", http.Header{"Retry-After": {"2"}, "Retry-After-Ms": {"1500"}}, upstreamError{}, 2 * time.Second},
		{"body retry delay", http.Header{"Retry-After": {"5"}}, google, 30 * time.Second},
		{"message seconds", nil, openAI("Rate limit reached. Please try again in 6.5s. Visit ..."), 6500 * time.Millisecond},
		{"message milliseconds", nil, openAI("Please try again in 20ms."), 20 * time.Millisecond},
		{"message minutes", nil, openAI("Please try again in 1m30s."), 90 * time.Second},
		{"message beyond a duration", nil, openAI("Please try again in 999999999999h."), maxHint},
		// Waits spelt in words: LiteLLM's router (BerriAI/litellm#3933),
		// Azure OpenAI (microsoft/sample-app-aoai-chatGPT#406).
		{"message in seconds, words", nil, openAI("No deployments available for selected model, Try again in 60 seconds. Passed model=m"), time.Minute},
		{"message retry after, words", nil, openAI("have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 9 seconds."), 9 * time.Second},
		{"message in one minute", nil, openAI("Try again in 1 minute."), time.Minute},
		{"message in milliseconds, words", nil, openAI("retry after 250 milliseconds"), 250 * time.Millisecond},
		{"message hours beyond a duration", nil, openAI("retry after 999999999999 hours"), maxHint},
		// Hugging Face's estimated_time (huggingface/unity-api#18).
		{"model loading", nil, decodeErrorBody([]byte(`{"error":"Model m is currently loading","estimated_time":20.0}`)), 20 * time.Second},
		// A relayed upstream error's message (OpenRouter's metadata.raw).
		{"relayed message", nil, decodeErrorBody([]byte(`{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"Rate limit reached. Please try again in 4s."}}}`)), 4 * time.Second},
		// A spent window's reset beside the other hints.
		{"spent window longer than Retry-After", http.Header{"Retry-After": {"1"}, "X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"6m0s"}},
			upstreamError{}, 6 * time.Minute},
		{"headers relayed in the body", nil, decodeErrorBody([]byte(openRouterDailyLimit)), time.UnixMilli(1741305600000).Sub(time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC))},
		{"negative header", http.Header{"Retry-After": {"-5"}, "Retry-After-Ms": {"-5"}}, upstreamError{}, 0},
		{"NaN and Inf", http.Header{"Retry-After": {"NaN"}, "Retry-After-Ms": {"Inf"}}, upstreamError{}, 0},
		{"huge ms", http.Header{"Retry-After-Ms": {"99999999999999999999999"}}, upstreamError{}, maxHint},
		{"huge seconds", http.Header{"Retry-After": {"99999999999999999999999.9"}}, upstreamError{}, maxHint},
	}
	for _, tt := range tests {
		at := now
		if tt.name == "headers relayed in the body" {
			at = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
		}
		if got := waitHint(tt.header, tt.body, at); got != tt.want {
			t.Errorf("%s: waitHint = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestSpentWindowsAreRead: each family of rate-limit headers gives its
// reset as a wait when, and only when, its remaining count is 0; the
// longest spent window wins.
func TestSpentWindowsAreRead(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	in := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		// OpenAI and Groq: Go durations (https://platform.openai.com/docs/guides/rate-limits).
		{"openai requests spent", map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s"}, 6 * time.Minute},
		{"openai tokens spent", map[string]string{"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1.5s"}, 1500 * time.Millisecond},
		{"openai milliseconds", map[string]string{"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "20ms"}, 20 * time.Millisecond},
		{"groq minutes and fractions", map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2m59.56s"}, 2*time.Minute + 59560*time.Millisecond},
		{"openai usage-based tokens", map[string]string{"x-ratelimit-remaining-tokens_usage_based": "0", "x-ratelimit-reset-tokens_usage_based": "9ms"}, 9 * time.Millisecond},
		{"only the spent window counts", map[string]string{"x-ratelimit-remaining-requests": "4999", "x-ratelimit-reset-requests": "6m0s",
			"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "7.66s"}, 7660 * time.Millisecond},
		{"the longer of two spent windows", map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s",
			"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "7.66s"}, 6 * time.Minute},
		{"remaining left is no wait", map[string]string{"x-ratelimit-remaining-requests": "1", "x-ratelimit-reset-requests": "6m0s"}, 0},
		{"a reset without its remaining is no wait", map[string]string{"x-ratelimit-reset-requests": "6m0s"}, 0},
		// Azure OpenAI: whole seconds, -1 when unknown (openai/openai-dotnet#838).
		{"azure whole seconds", map[string]string{"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "30"}, 30 * time.Second},
		{"azure unknown remaining", map[string]string{"x-ratelimit-remaining-tokens": "-1", "x-ratelimit-reset-tokens": "30"}, 0},
		// Cerebras: per day and per minute, decimal seconds
		// (https://inference-docs.cerebras.ai/support/rate-limits).
		{"cerebras day", map[string]string{"x-ratelimit-remaining-requests-day": "0", "x-ratelimit-reset-requests-day": "33011.382867"}, 33011382867 * time.Microsecond},
		{"cerebras minute", map[string]string{"x-ratelimit-remaining-tokens-minute": "0", "x-ratelimit-reset-tokens-minute": "11.38"}, 11380 * time.Millisecond},
		// Together and others: seconds; OpenRouter: milliseconds since the
		// epoch (Gitlawb/openclaude#936); others: seconds since the epoch.
		{"together seconds", map[string]string{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "12"}, 12 * time.Second},
		{"openrouter epoch milliseconds", map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1748782800000"}, time.UnixMilli(1748782800000).Sub(now)},
		{"epoch seconds", map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1748779260"}, time.Minute},
		{"a reset in the past is no wait", map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1700000000000"}, 0},
		// Anthropic: RFC 3339 times (https://docs.claude.com/en/api/rate-limits).
		{"anthropic requests", map[string]string{"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": in(40 * time.Second)}, 40 * time.Second},
		{"anthropic input tokens", map[string]string{"anthropic-ratelimit-input-tokens-remaining": "0", "anthropic-ratelimit-input-tokens-reset": in(2 * time.Minute),
			"anthropic-ratelimit-output-tokens-remaining": "0", "anthropic-ratelimit-output-tokens-reset": in(time.Minute)}, 2 * time.Minute},
		{"anthropic tokens left", map[string]string{"anthropic-ratelimit-tokens-remaining": "12000", "anthropic-ratelimit-tokens-reset": in(time.Hour)}, 0},
		// IETF drafts up to -06: delta seconds.
		{"ietf separate fields", map[string]string{"RateLimit-Remaining": "0", "RateLimit-Reset": "50"}, 50 * time.Second},
		{"ietf remaining left", map[string]string{"RateLimit-Remaining": "3", "RateLimit-Reset": "50"}, 0},
		// IETF draft -07 and later: one RateLimit field.
		{"ietf policies", map[string]string{"RateLimit": `"burst";r=5;t=1, "daily";r=0;t=3600`}, time.Hour},
		{"ietf policy with room", map[string]string{"RateLimit": `"default";r=50;t=30`}, 0},
		{"ietf dictionary", map[string]string{"RateLimit": "limit=10, remaining=0, reset=7"}, 7 * time.Second},
		// Hostile values: bounded, never negative, never a panic.
		{"reset beyond a duration", map[string]string{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "99999999999999999999h"}, maxHint},
		{"reset of too many digits", map[string]string{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "9999999999999999999999999"}, maxHint},
		{"negative reset", map[string]string{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "-30"}, 0},
		{"negative duration", map[string]string{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "-6m0s"}, 0},
		{"garbage", map[string]string{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "soon"}, 0},
		{"NaN remaining", map[string]string{"x-ratelimit-remaining": "NaN", "x-ratelimit-reset": "30"}, 0},
		{"policy with a huge t", map[string]string{"RateLimit": `"p";r=0;t=99999999999999999999999`}, maxHint},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		if got := windowWait(h, now); got != tt.want {
			t.Errorf("%s: windowWait = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestPolicyWaitReadsABoundedNumberOfPolicies: a RateLimit field of a
// million policies is read up to maxPolicies.
func TestPolicyWaitReadsABoundedNumberOfPolicies(t *testing.T) {
	field := strings.Repeat(`"p";r=1;t=1,`, 1_000_000) + `"last";r=0;t=60`
	if got := policyWait([]string{field}); got != 0 {
		t.Errorf("policyWait read past maxPolicies: %v", got)
	}
}

// FuzzWaitHint feeds the hint readers whatever headers and messages a
// provider might send: the wait is never negative, never beyond maxHint,
// and never shorter than any one hint.
func FuzzWaitHint(f *testing.F) {
	for _, seed := range [][7]string{
		{"2.5", "3000", "Please try again in 6.5s", "0", "6m0s", "2025-06-01T12:01:00Z", `"p";r=0;t=30`},
		{"", "", "", "", "", "", ""},
		{"-1", "-1", "try again in -1s", "-1", "-1", "-1", `"p";r=-1;t=-1`},
		{"NaN", "Inf", "try again in 1e9s", "NaN", "Inf", "NaN", "limit=1, remaining=0, reset=NaN"},
		{"99999999999999999999", "99999999999999999999.9", "try again in 99999999999h", "0", "99999999999999999999999", "9999-12-31T23:59:59Z", `"p";r=0;t=99999999999999999999`},
		{"Mon, 02 Jan 2006 15:04:05 GMT", "0.0001", "try again in 1h2m3.5s4ms", "0.0", "1748782800000", "2025-06-01T11:00:00Z", "limit=10, remaining=0, reset=7"},
		{"", "", "Please retry after 86400 seconds.", "0", "2m59.56s", "not a time", `"a";r=0;t=1, "b";r=0;t=2`},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3], seed[4], seed[5], seed[6])
	}
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, retryAfter, retryAfterMs, msg, remaining, reset, anthropicReset, policy string) {
		h := http.Header{"Retry-After": {retryAfter}, "Retry-After-Ms": {retryAfterMs},
			"X-Ratelimit-Remaining-Requests": {remaining}, "X-Ratelimit-Reset-Requests": {reset},
			"Anthropic-Ratelimit-Tokens-Remaining": {remaining}, "Anthropic-Ratelimit-Tokens-Reset": {anthropicReset},
			"Ratelimit": {policy}}
		d := waitHint(h, upstreamError{message: msg}, now)
		if d < 0 || d > maxHint {
			t.Fatalf("waitHint(%q) = %v, out of bounds", h, d)
		}
		if ra, ok := ParseRetryAfter(retryAfter, now); ok && d < ra {
			t.Fatalf("waitHint %v shorter than Retry-After %v", d, ra)
		}
		if ms, ok := parseDecimal(strings.TrimSpace(retryAfterMs), time.Millisecond); ok && (d < ms || ms < 0) {
			t.Fatalf("waitHint %v shorter than retry-after-ms %v", d, ms)
		}
		if md := messageDelay(msg); d < md || md < 0 {
			t.Fatalf("waitHint %v shorter than the message's %v", d, md)
		}
		for _, r := range []string{reset, anthropicReset} {
			if rd, ok := parseReset(r, now); ok && (rd < 0 || rd > maxHint || (spent(remaining) && d < rd)) {
				t.Fatalf("waitHint %v, reset %q of a window %q left gives %v", d, r, remaining, rd)
			}
		}
		if pw := policyWait([]string{policy}); pw < 0 || d < pw {
			t.Fatalf("waitHint %v shorter than the RateLimit field's %v", d, pw)
		}
	})
}
