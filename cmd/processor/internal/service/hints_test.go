package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/kvstate"
)

// storedCooldown reads a provider's cooldown key from the bucket's stream,
// with the server TTL it carries.
func (h *harness) storedCooldown(provider string) (kvstate.Cooldown, time.Duration) {
	h.t.Helper()
	ctx := context.Background()
	s, err := h.js.Stream(ctx, "KV_"+kvstate.Bucket)
	if err != nil {
		h.t.Fatal(err)
	}
	raw, err := s.GetLastMsgForSubject(ctx, "$KV."+kvstate.Bucket+"."+kvstate.CooldownKey(provider))
	if err != nil {
		h.t.Fatalf("no cooldown key for %s: %v", provider, err)
	}
	ttl, err := time.ParseDuration(raw.Header.Get("Nats-TTL"))
	if err != nil {
		h.t.Fatalf("cooldown TTL header %q: %v", raw.Header.Get("Nats-TTL"), err)
	}
	var c kvstate.Cooldown
	if err := json.Unmarshal(raw.Data, &c); err != nil {
		h.t.Fatal(err)
	}
	return c, ttl
}

// withRetryAfter answers every request with status and a Retry-After header.
func withRetryAfter(status int, retryAfter string) providertest.Script {
	return func(int, providertest.Request) providertest.Reply {
		return providertest.Reply{Status: status, Header: http.Header{"Retry-After": {retryAfter}}}
	}
}

// TestWaitHintCoolsAnyRetryableClass: a wait hint longer than max_retry_wait
// opens a cooldown of its length at once whatever the retryable class (a
// 503 or a 529 asking for two minutes, not only a 429), and a hint-derived
// cooldown is capped at max_cooldown.
func TestWaitHintCoolsAnyRetryableClass(t *testing.T) {
	cases := []struct {
		name       string
		status     int
		retryAfter string
		class      chain.Class
		want       time.Duration
	}{
		{"503 asks for 2 minutes", 503, "120", chain.ClassServer, 120 * time.Second},
		{"529 asks for 2 minutes", 529, "120", chain.ClassServer, 120 * time.Second},
		{"408 asks for 2 minutes", 408, "120", chain.ClassTimeout, 120 * time.Second},
		{"429 asks for a day", 429, "86400", chain.ClassRateLimit, time.Hour},
		{"503 asks for a day", 503, "86400", chain.ClassServer, time.Hour},
	}
	for _, flavor := range []providertest.Flavor{providertest.OpenAI, providertest.Anthropic} {
		for _, tc := range cases {
			t.Run(flavor.String()+"/"+tc.name, func(t *testing.T) {
				hinting := providertest.New(flavor, withRetryAfter(tc.status, tc.retryAfter))
				defer hinting.Close()
				backup := providertest.New(flavor, providertest.OK())
				defer backup.Close()
				h := newHarness(t)
				h.startProcessor(parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: hinting, type: %[1]s, base_url: %[2]s, model: m1, max_retries: 3, max_retry_wait: 10s, failure_threshold: 3, cooldown: 10s, max_cooldown: 1h}
  - {name: backup, type: %[1]s, base_url: %[3]s, model: m2}
chains:
  default: [hinting, backup]
`, flavor, hinting.URL, backup.URL)), testSettings())

				for i := range 3 {
					id := fmt.Sprintf("r%d", i)
					h.publish("default", request(id, "hello"))
					if res, _ := h.waitResult(id, 10*time.Second); res.Provider != "backup" {
						t.Fatalf("%s answered by %q, want backup", id, res.Provider)
					}
				}
				if got := hinting.Requests(); got != 1 {
					t.Fatalf("the hinting provider received %d requests, want 1 (cooled at once, no retry)", got)
				}
				c, ttl := h.storedCooldown("hinting")
				if ttl != tc.want || c.DurationS != int64(tc.want/time.Second) || c.Class != tc.class {
					t.Fatalf("cooldown %+v with TTL %v, want %v of %s", c, ttl, tc.want, tc.class)
				}
			})
		}
	}
}

// TestAuthFailureOutranksARunningRetryAfterCooldown: a 401 that arrives
// while a 20 s Retry-After cooldown runs (from a call that was already in
// flight) replaces it with the 1 h auth cooldown instead of being dropped.
func TestAuthFailureOutranksARunningRetryAfterCooldown(t *testing.T) {
	for _, flavor := range []providertest.Flavor{providertest.OpenAI, providertest.Anthropic} {
		t.Run(flavor.String(), func(t *testing.T) {
			// Both calls are in flight before either answers: the first
			// answers 429 with Retry-After 20 at once, the second 401 a
			// moment later, once the 20 s cooldown is open.
			var arrived sync.WaitGroup
			arrived.Add(2)
			script := func(n int, _ providertest.Request) providertest.Reply {
				arrived.Done()
				arrived.Wait()
				if n == 1 {
					return providertest.Reply{Status: 429, Header: http.Header{"Retry-After": {"20"}}}
				}
				return providertest.Reply{Status: 401, Delay: 300 * time.Millisecond}
			}
			flaky := providertest.New(flavor, script)
			defer flaky.Close()
			backup := providertest.New(flavor, providertest.OK())
			defer backup.Close()
			h := newHarness(t)
			h.startProcessor(parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: flaky, type: %[1]s, base_url: %[2]s, model: m1, max_retry_wait: 5s, failure_threshold: 3, cooldown: 10s, auth_cooldown: 1h}
  - {name: backup, type: %[1]s, base_url: %[3]s, model: m2}
chains:
  default: [flaky, backup]
`, flavor, flaky.URL, backup.URL)), testSettings())

			h.publish("default", request("a", "hello"))
			h.publish("default", request("b", "hello"))
			for _, id := range []string{"a", "b"} {
				if res, _ := h.waitResult(id, 10*time.Second); res.Provider != "backup" {
					t.Fatalf("%s answered by %q, want backup", id, res.Provider)
				}
			}
			c, ttl := h.storedCooldown("flaky")
			if c.Class != chain.ClassAuth || ttl != time.Hour || c.DurationS != 3600 || c.Trip != 2 {
				t.Fatalf("cooldown %+v with TTL %v, want the 1h auth cooldown as trip 2", c, ttl)
			}
			if got := flaky.Requests(); got != 2 {
				t.Fatalf("flaky received %d requests, want 2", got)
			}
		})
	}
}

// TestSpentWindowCoolsForItsReset: a 429 whose only hint is OpenAI's spent
// window (x-ratelimit-remaining-requests 0, x-ratelimit-reset-requests
// 6m0s), longer than max_retry_wait, is not retried into the closed window:
// it opens a six-minute cooldown at once, and the provider receives one
// call in all.
func TestSpentWindowCoolsForItsReset(t *testing.T) {
	forBothFlavors(t, func(t *testing.T, flavor providertest.Flavor) {
		script := providertest.WithHeader("x-ratelimit-remaining-requests", "0",
			providertest.WithHeader("x-ratelimit-reset-requests", "6m0s", providertest.Status(429)))
		s := newBodyScenario(t, flavor, script, "max_retries: 3, max_retry_wait: 10s, failure_threshold: 3, cooldown: 10s, max_cooldown: 1h")
		res := s.answer("window")
		first := res.Attempts[0]
		if res.Provider != "backup" || first.Class != chain.ClassRateLimit || first.RetryAfterMs != 360_000 || len(res.Attempts) != 2 {
			t.Fatalf("provider %q attempts %+v; want one rate_limit asking 360000 ms, then backup", res.Provider, res.Attempts)
		}
		c, ttl := s.h.storedCooldown("primary")
		if c.Class != chain.ClassRateLimit || c.DurationS != 360 || ttl != 6*time.Minute {
			t.Fatalf("cooldown %+v with TTL %v, want six minutes of rate_limit", c, ttl)
		}
		if res := s.answer("closed"); res.Attempts[0].Class != chain.ClassCooldown {
			t.Fatalf("next request attempts %+v, want primary skipped", res.Attempts)
		}
		if got := s.primary.Requests(); got != 1 {
			t.Fatalf("primary received %d requests, want 1", got)
		}
	})
}
