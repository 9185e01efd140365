package service_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/kvstate"
)

// TestBadRequestNeverCools is the first half of acceptance 4: a 400 is the
// request's fault, not an outage, however often it happens.
func TestBadRequestNeverCools(t *testing.T) {
	picky := providertest.New(providertest.OpenAI, providertest.Status(400))
	defer picky.Close()
	backup := providertest.New(providertest.OpenAI, providertest.OK())
	defer backup.Close()
	h := newHarness(t)
	p := h.startProcessor(parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: picky, type: openai, base_url: %s, model: m1, failure_threshold: 1, max_retries: 3}
  - {name: backup, type: openai, base_url: %s, model: m2}
chains:
  default: [picky, backup]
`, picky.URL, backup.URL)), testSettings())

	const n = 20
	for i := range n {
		id := fmt.Sprintf("r%d", i)
		h.publish("default", request(id, "hello"))
		res, _ := h.waitResult(id, 10*time.Second)
		if res.Provider != "backup" || res.Attempts[0].Class != chain.ClassRequest || res.Attempts[0].StatusCode != 400 {
			t.Fatalf("%s: provider %q attempts %+v", id, res.Provider, res.Attempts)
		}
	}
	if got := picky.Requests(); got != n {
		t.Fatalf("picky received %d requests, want %d (one per request, never skipped, never retried)", got, n)
	}
	if _, cooling := mirroredCooldown(p.StoreForTest(), "picky"); cooling {
		t.Fatal("a 400 opened a cooldown")
	}
	kv, err := h.js.KeyValue(context.Background(), kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{kvstate.CooldownKey("picky"), kvstate.HealthKey("picky")} {
		if _, err := kv.Get(context.Background(), key); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("key %s: err = %v, want not found (a 400 writes nothing)", key, err)
		}
	}
}

// TestRateLimitHonoursRetryAfter is the second half of acceptance 4: a 429
// with Retry-After: 1 is retried no sooner than one second later. It runs
// for both adapters, with Retry-After in seconds and as an HTTP-date.
func TestRateLimitHonoursRetryAfter(t *testing.T) {
	for _, flavor := range []providertest.Flavor{providertest.OpenAI, providertest.Anthropic} {
		for _, form := range []string{"seconds", "http-date"} {
			t.Run(flavor.String()+"/"+form, func(t *testing.T) {
				var mu sync.Mutex
				var arrivals []time.Time
				limited := providertest.New(flavor, func(n int, req providertest.Request) providertest.Reply {
					now := time.Now()
					mu.Lock()
					arrivals = append(arrivals, now)
					mu.Unlock()
					retryAfter := "1"
					if form == "http-date" {
						// An HTTP-date has whole seconds: two from now waits
						// at least one.
						retryAfter = now.Add(2 * time.Second).UTC().Format(http.TimeFormat)
					}
					return providertest.Sequence(providertest.RateLimited(retryAfter), providertest.OK())(n, req)
				})
				defer limited.Close()
				h := newHarness(t)
				h.startProcessor(parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: limited, type: %s, base_url: %s, model: m1, max_retries: 1, backoff_base: 1ms, backoff_max: 2ms}
chains:
  default: [limited]
`, flavor, limited.URL)), testSettings())

				h.publish("default", request("rl", "hello"))
				res, _ := h.waitResult("rl", 10*time.Second)
				if res.Status != chain.StatusOK || res.Provider != "limited" || res.Deliveries != 1 {
					t.Fatalf("got %+v, want ok from limited in one delivery", res)
				}
				if res.Attempts[0].Class != chain.ClassRateLimit || res.Attempts[0].RetryAfterMs < 1000 {
					t.Fatalf("first attempt %+v, want rate_limit with retry_after_ms of at least 1000", res.Attempts[0])
				}
				mu.Lock()
				defer mu.Unlock()
				if len(arrivals) != 2 {
					t.Fatalf("limited received %d requests, want 2", len(arrivals))
				}
				if gap := arrivals[1].Sub(arrivals[0]); gap < time.Second {
					t.Fatalf("retried after %v, want at least 1s", gap)
				}
			})
		}
	}
}

// TestLongRetryAfterCoolsInsteadOfSleeping is acceptance 3 of the
// failure-semantics issue: a 429 asking for 120 s with max_retry_wait 10s
// opens a 120 s cooldown at once, and the provider gets no second call.
func TestLongRetryAfterCoolsInsteadOfSleeping(t *testing.T) {
	for _, flavor := range []providertest.Flavor{providertest.OpenAI, providertest.Anthropic} {
		t.Run(flavor.String(), func(t *testing.T) { longRetryAfterCools(t, flavor) })
	}
}

func longRetryAfterCools(t *testing.T, flavor providertest.Flavor) {
	limited := providertest.New(flavor, providertest.RateLimited("120"))
	defer limited.Close()
	backup := providertest.New(flavor, providertest.OK())
	defer backup.Close()
	h := newHarness(t)
	h.startProcessor(parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: limited, type: %[1]s, base_url: %[2]s, model: m1, max_retries: 3, max_retry_wait: 10s}
  - {name: backup, type: %[1]s, base_url: %[3]s, model: m2}
chains:
  default: [limited, backup]
`, flavor, limited.URL, backup.URL)), testSettings())

	for i := range 3 {
		id := fmt.Sprintf("r%d", i)
		h.publish("default", request(id, "hello"))
		if res, _ := h.waitResult(id, 10*time.Second); res.Provider != "backup" {
			t.Fatalf("%s answered by %q, want backup", id, res.Provider)
		}
	}
	if got := limited.Requests(); got != 1 {
		t.Fatalf("limited received %d requests, want 1", got)
	}
	c, ttl := h.storedCooldown("limited")
	if ttl != 120*time.Second {
		t.Fatalf("cooldown TTL %v, want 120s", ttl)
	}
	if c.DurationS != 120 || c.Class != chain.ClassRateLimit {
		t.Fatalf("cooldown %+v, want 120 s of rate_limit", c)
	}
}
