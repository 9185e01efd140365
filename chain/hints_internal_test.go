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
		{"negative header", http.Header{"Retry-After": {"-5"}, "Retry-After-Ms": {"-5"}}, upstreamError{}, 0},
		{"NaN and Inf", http.Header{"Retry-After": {"NaN"}, "Retry-After-Ms": {"Inf"}}, upstreamError{}, 0},
		{"huge ms", http.Header{"Retry-After-Ms": {"99999999999999999999999"}}, upstreamError{}, maxHint},
		{"huge seconds", http.Header{"Retry-After": {"99999999999999999999999.9"}}, upstreamError{}, maxHint},
	}
	for _, tt := range tests {
		if got := waitHint(tt.header, tt.body, now); got != tt.want {
			t.Errorf("%s: waitHint = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// FuzzWaitHint feeds the hint readers whatever headers and messages a
// provider might send: the wait is never negative, never beyond maxHint,
// and never shorter than any one hint.
func FuzzWaitHint(f *testing.F) {
	for _, seed := range [][3]string{
		{"2.5", "3000", "Please try again in 6.5s"}, {"", "", ""}, {"-1", "-1", "try again in -1s"},
		{"NaN", "Inf", "try again in 1e9s"}, {"99999999999999999999", "99999999999999999999.9", "try again in 99999999999h"},
		{"Mon, 02 Jan 2006 15:04:05 GMT", "0.0001", "try again in 1h2m3.5s4ms"},
		{"", "", "Please retry after 86400 seconds."}, {"", "", "Try again in 99999999999999 hours"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, retryAfter, retryAfterMs, msg string) {
		h := http.Header{"Retry-After": {retryAfter}, "Retry-After-Ms": {retryAfterMs}}
		d := waitHint(h, upstreamError{message: msg}, now)
		if d < 0 || d > maxHint {
			t.Fatalf("waitHint(%q, %q, %q) = %v, out of bounds", retryAfter, retryAfterMs, msg, d)
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
	})
}
