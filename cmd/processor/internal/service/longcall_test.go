package service_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

// TestLongCallIsNotRedelivered is acceptance 4 of the nothing-lost issue: a
// provider call of 45 s with an AckWait of 10 s is answered once, on the
// first delivery, because the worker sends InProgress while it waits.
func TestLongCallIsNotRedelivered(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 45 s for a slow provider")
	}
	t.Parallel()
	slow := providertest.New(providertest.OpenAI, providertest.Slow(45*time.Second, providertest.OK()))
	defer slow.Close()
	h := newHarness(t)
	settings := testSettings()
	settings.AckWait = 10 * time.Second
	// Two processors, so a redelivery would find a free worker at once.
	file := parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: slow, type: openai, base_url: %s, model: m-slow, timeout: 60s}
chains:
  default: [slow]
`, slow.URL))
	h.startProcessor(file, settings)
	h.startProcessor(file, settings)

	h.publish("default", request("long", "take your time"))
	res, _ := h.waitResult("long", 90*time.Second)
	if res.Status != chain.StatusOK || res.Deliveries != 1 {
		t.Fatalf("got status %s after %d deliveries, want ok after 1", res.Status, res.Deliveries)
	}
	if res.LatencyMs < 45_000 {
		t.Fatalf("answered in %d ms, faster than the provider's 45 s", res.LatencyMs)
	}
	// Give a stray redelivery time to show up as a second call.
	time.Sleep(2 * time.Second)
	if got := slow.Requests(); got != 1 {
		t.Fatalf("provider received %d calls, want 1", got)
	}
}

// TestWaitingRequestsAreNotPaidTwice checks that a request waiting for a
// free worker is not redelivered behind its processor's back: calls longer
// than AckWait, more requests than workers, two processors, and still one
// provider call per request. (A client-side buffer of pulled deliveries
// would let their AckWait run out unseen.)
func TestWaitingRequestsAreNotPaidTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for slow calls")
	}
	t.Parallel()
	slow := providertest.New(providertest.OpenAI, providertest.Slow(3*time.Second, providertest.OK()))
	defer slow.Close()
	h := newHarness(t)
	settings := testSettings()
	settings.Workers, settings.AckWait = 4, 2*time.Second
	file := parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: slow, type: openai, base_url: %s, model: m-slow, timeout: 10s}
chains:
  default: [slow]
`, slow.URL))
	h.startProcessor(file, settings)
	h.startProcessor(file, settings)

	const n = 16
	for i := range n {
		h.publish("default", request(fmt.Sprintf("w%d", i), "hello"))
	}
	for i := range n {
		if res, _ := h.waitResult(fmt.Sprintf("w%d", i), 60*time.Second); res.Status != chain.StatusOK {
			t.Fatalf("w%d: %+v", i, res)
		}
	}
	time.Sleep(3 * time.Second) // room for a stray second call to arrive
	if got := slow.Requests(); got != n {
		t.Fatalf("provider received %d calls for %d requests", got, n)
	}
}
