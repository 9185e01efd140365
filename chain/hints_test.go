package chain_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

// TestEveryWaitHintIsRead: both adapters read every hint a provider may
// send, in headers and in the body, and keep the longest.
func TestEveryWaitHintIsRead(t *testing.T) {
	limited := providertest.Status(429)
	cases := []struct {
		name    string
		flavors []providertest.Flavor
		script  providertest.Script
		want    time.Duration
	}{
		{"decimal Retry-After rounds up", nil, providertest.WithHeader("Retry-After", "2.5", limited), 3 * time.Second},
		{"retry-after-ms alone", nil, providertest.WithHeader("retry-after-ms", "3000", limited), 3 * time.Second},
		{"the longer of the two headers", nil, providertest.WithHeader("Retry-After", "2", providertest.WithHeader("retry-after-ms", "3500", limited)), 3500 * time.Millisecond},
		{"google retryDelay", nil, providertest.ResourceExhausted("1.5s"), 1500 * time.Millisecond},
		{"retryDelay longer than Retry-After", nil, providertest.WithHeader("Retry-After", "5", providertest.ResourceExhausted("30s")), 30 * time.Second},
		{"openai message", openAIOnly, reply(providertest.Reply{Status: 429, ErrorMessage: openAITPMMessage}), 2 * time.Second},
		{"error in a 200 with retry-after-ms", nil, providertest.WithHeader("retry-after-ms", "1500", providertest.ErrorIn200(429)), 1500 * time.Millisecond},
		{"negative and unreadable hints are none", nil, providertest.WithHeader("Retry-After", "-3", providertest.WithHeader("retry-after-ms", "NaN", limited)), 0},
		// A spent window's reset, and only a spent one's.
		{"openai spent requests window", nil, spentWindow("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "6m0s"), 6 * time.Minute},
		{"openai window with room", nil, spentWindow("x-ratelimit-remaining-requests", "3", "x-ratelimit-reset-requests", "6m0s"), 0},
		{"cerebras daily window", nil, spentWindow("x-ratelimit-remaining-requests-day", "0", "x-ratelimit-reset-requests-day", "33011.5"), 33011500 * time.Millisecond},
		{"ietf RateLimit field", nil, providertest.WithHeader("RateLimit", `"default";r=0;t=45`, limited), 45 * time.Second},
		{"hugging face estimated_time", nil, providertest.ModelLoading(20), 20 * time.Second},
		{"a wait in words", nil, reply(providertest.Reply{Status: 429, ErrorShape: providertest.ShapeString, ErrorMessage: "Rate limit is exceeded. Try again in 30 seconds."}), 30 * time.Second},
	}
	for _, tc := range cases {
		flavors := tc.flavors
		if flavors == nil {
			flavors = bothFlavors
		}
		for _, f := range flavors {
			_, err := callFlavor(t, f, tc.script)
			ce := wantCallError(t, err)
			if ce.RetryAfter != tc.want {
				t.Errorf("%s/%s: RetryAfter %v, want %v", f, tc.name, ce.RetryAfter, tc.want)
			}
		}
	}
}

// TestRetryWaitsForRetryAfterMs: the chain sleeps for a retry-after-ms hint
// before its retry, as the server's arrival times show.
func TestRetryWaitsForRetryAfterMs(t *testing.T) {
	t.Parallel()
	script := providertest.Sequence(providertest.WithHeader("retry-after-ms", "300", providertest.Status(429)), providertest.OK())
	step, srv := fakeProvider(t, "primary", script, chain.Policy{MaxRetries: 1, MaxRetryWait: time.Second})

	res, err := newChain(newMemState(), step).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "primary", 0)
	if res.Attempts[0].RetryAfterMs != 300 {
		t.Errorf("first attempt %+v, want retry_after_ms 300", res.Attempts[0])
	}
	got := srv.Received()
	if len(got) != 2 {
		t.Fatalf("%d requests, want 2", len(got))
	}
	if gap := got[1].At.Sub(got[0].At); gap < 300*time.Millisecond {
		t.Errorf("retried after %v, want at least 300ms", gap)
	}
}

// spentWindow is a 429 carrying one rate-limit window's remaining count
// and reset.
// callError makes one call through flavour f's adapter to a server running
// script and returns its error.
func callError(t *testing.T, f providertest.Flavor, script providertest.Script) error {
	t.Helper()
	_, err := callFlavor(t, f, script)
	return err
}

func spentWindow(remainingKey, remaining, resetKey, reset string) providertest.Script {
	return providertest.WithHeader(remainingKey, remaining, providertest.WithHeader(resetKey, reset, providertest.Status(429)))
}

// TestTimesAreReadOnTheProvidersClock: a provider whose clock is two
// minutes behind (its Date header says so) names its waits as times on
// that clock: an HTTP-date Retry-After and a reset five seconds after its
// Date are waits of five seconds, not of none; nor, on a clock ahead, of
// two minutes more.
func TestTimesAreReadOnTheProvidersClock(t *testing.T) {
	for _, skew := range []time.Duration{-2 * time.Minute, 2 * time.Minute} {
		date := time.Now().Add(skew).Truncate(time.Second)
		at := date.Add(5 * time.Second)
		for name, script := range map[string]providertest.Script{
			"Retry-After date": providertest.WithHeader("Retry-After", at.UTC().Format(http.TimeFormat), providertest.Status(429)),
			"anthropic reset":  spentWindow("anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", at.UTC().Format(time.RFC3339)),
		} {
			script = providertest.WithHeader("Date", date.UTC().Format(http.TimeFormat), script)
			ce := wantCallError(t, callError(t, providertest.Anthropic, script))
			if ce.RetryAfter != 5*time.Second {
				t.Errorf("skew %v, %s: RetryAfter %v, want 5s from the provider's Date", skew, name, ce.RetryAfter)
			}
		}
	}
}

// TestResetsAtATimeAreRead: the resets written as a time, Anthropic's RFC
// 3339 header and OpenRouter's epoch milliseconds in the body, give the
// wait from the answer to that time.
func TestResetsAtATimeAreRead(t *testing.T) {
	reset := time.Now().Add(2 * time.Minute).Truncate(time.Second)
	cases := map[string]providertest.Script{
		"anthropic tokens window": spentWindow("anthropic-ratelimit-tokens-remaining", "0", "anthropic-ratelimit-tokens-reset", reset.UTC().Format(time.RFC3339)),
		"openrouter daily limit":  providertest.DailyLimit(reset),
	}
	for name, script := range cases {
		for _, f := range bothFlavors {
			before := time.Now()
			_, err := callFlavor(t, f, script)
			ce := wantCallError(t, err)
			if ce.RetryAfter > reset.Sub(before) || ce.RetryAfter < reset.Sub(time.Now()) {
				t.Errorf("%s/%s: RetryAfter %v, want the time left until %v", f, name, ce.RetryAfter, reset)
			}
		}
	}
}
