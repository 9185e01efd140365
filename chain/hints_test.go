package chain_test

import (
	"context"
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
