package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/kvstate"
)

// The scenarios of this file read the failure class from the body, not only
// the status (chain's body table), for both adapters, through a processor
// on a real NATS server with the real KV state: "primary" runs the script
// under test with the knobs each scenario gives, "backup" answers.

// bodyScenario is one processor with a primary provider under test and a
// backup that answers.
type bodyScenario struct {
	h       *harness
	primary *providertest.Server
	backup  *providertest.Server
	store   *kvstate.Store
}

func newBodyScenario(t *testing.T, flavor providertest.Flavor, script providertest.Script, knobs string) *bodyScenario {
	t.Helper()
	primary := providertest.New(flavor, script)
	t.Cleanup(primary.Close)
	backup := providertest.New(flavor, providertest.OK())
	t.Cleanup(backup.Close)
	h := newHarness(t)
	p := h.startProcessor(parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: primary, type: %[1]s, base_url: %[2]s, model: m1, backoff_base: 1ms, backoff_max: 2ms, %[4]s}
  - {name: backup, type: %[1]s, base_url: %[3]s, model: m2}
chains:
  default: [primary, backup]
`, flavor, primary.URL, backup.URL, knobs)), testSettings())
	return &bodyScenario{h: h, primary: primary, backup: backup, store: p.StoreForTest()}
}

// answer publishes a request and waits for its result.
func (s *bodyScenario) answer(id string) chain.Result {
	s.h.t.Helper()
	s.h.publish("default", request(id, "hello"))
	res, _ := s.h.waitResult(id, 10*time.Second)
	return res
}

// kvValue reads key of the providers bucket into v; false when the key does
// not exist.
func (s *bodyScenario) kvValue(key string, v any) bool {
	s.h.t.Helper()
	ctx := context.Background()
	kv, err := s.h.js.KeyValue(ctx, kvstate.Bucket)
	if err != nil {
		s.h.t.Fatal(err)
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false
	}
	if err != nil {
		s.h.t.Fatal(err)
	}
	if err := json.Unmarshal(e.Value(), v); err != nil {
		s.h.t.Fatalf("%s: %v", key, err)
	}
	return true
}

// wantNothingWritten fails if the primary has a health or cooldown key: the
// failure was not an outage.
func (s *bodyScenario) wantNothingWritten() {
	s.h.t.Helper()
	for _, key := range []string{kvstate.HealthKey("primary"), kvstate.CooldownKey("primary")} {
		var v map[string]any
		if s.kvValue(key, &v) {
			s.h.t.Fatalf("key %s written: %v", key, v)
		}
	}
}

// forBothFlavors runs scenario once per adapter, in parallel.
func forBothFlavors(t *testing.T, scenario func(t *testing.T, flavor providertest.Flavor)) {
	for _, flavor := range []providertest.Flavor{providertest.OpenAI, providertest.Anthropic} {
		t.Run(flavor.String(), func(t *testing.T) {
			t.Parallel()
			scenario(t, flavor)
		})
	}
}

// TestOutOfCreditOpensAuthCooldown: OpenAI's 429 insufficient_quota and
// Anthropic's 400 "credit balance is too low" are auth: one call, no
// retry, and a cooldown of exactly auth_cooldown.
func TestOutOfCreditOpensAuthCooldown(t *testing.T) {
	forBothFlavors(t, func(t *testing.T, flavor providertest.Flavor) {
		s := newBodyScenario(t, flavor, providertest.OutOfCredit(), "max_retries: 3, failure_threshold: 3, auth_cooldown: 7s")
		res := s.answer("credit")
		first := res.Attempts[0]
		status, words := 429, "You exceeded your current quota"
		if flavor == providertest.Anthropic {
			status, words = 400, "Your credit balance is too low"
		}
		if res.Provider != "backup" || first.Class != chain.ClassAuth || first.StatusCode != status || !strings.Contains(first.Error, words) {
			t.Fatalf("provider %q, first attempt %+v; want backup after auth %d with %q", res.Provider, first, status, words)
		}
		if got := s.primary.Requests(); got != 1 {
			t.Fatalf("primary received %d requests, want 1", got)
		}
		var c kvstate.Cooldown
		if !s.kvValue(kvstate.CooldownKey("primary"), &c) || c.Class != chain.ClassAuth || c.DurationS != 7 {
			t.Fatalf("cooldown %+v, want 7 s of auth", c)
		}
		if _, ttl := s.h.storedCooldown("primary"); ttl != 7*time.Second {
			t.Fatalf("cooldown TTL %v, want auth_cooldown 7s", ttl)
		}
	})
}

// TestErrorInA200IsCountedUntilCooled: a 200 whose body is
// {"error":{"message":...,"code":429}} is a rate limit, not an empty
// answer: retried, counted, and a provider answering only that is cooled
// at failure_threshold; the upstream message is in the attempt's error.
func TestErrorInA200IsCountedUntilCooled(t *testing.T) {
	forBothFlavors(t, func(t *testing.T, flavor providertest.Flavor) {
		s := newBodyScenario(t, flavor, providertest.ErrorIn200(429), "max_retries: 1, failure_threshold: 2, cooldown: 2s")
		res := s.answer("in200")
		if res.Provider != "backup" || len(res.Attempts) != 3 {
			t.Fatalf("provider %q attempts %+v; want two calls to primary, then backup", res.Provider, res.Attempts)
		}
		for _, a := range res.Attempts[:2] {
			if a.Class != chain.ClassRateLimit || a.StatusCode != 200 || !strings.Contains(a.Error, "scripted 429 Too Many Requests") {
				t.Fatalf("attempt %+v; want rate_limit on a 200 keeping the upstream message", a)
			}
		}
		var c kvstate.Cooldown
		if !s.kvValue(kvstate.CooldownKey("primary"), &c) || c.Class != chain.ClassRateLimit {
			t.Fatalf("cooldown %+v, want one opened by rate_limit at failure_threshold", c)
		}
		if res := s.answer("skipped"); res.Provider != "backup" || res.Attempts[0].Class != chain.ClassCooldown {
			t.Fatalf("next request: provider %q attempts %+v; want primary skipped", res.Provider, res.Attempts)
		}
		if got := s.primary.Requests(); got != 2 {
			t.Fatalf("primary received %d requests, want 2", got)
		}
	})
}

// TestContextOverflowIsTheRequestsFault: a 500 saying the prompt exceeds
// the context window is class request: one call, nothing written to the
// provider's health or cooldown, and the next provider answers.
func TestContextOverflowIsTheRequestsFault(t *testing.T) {
	forBothFlavors(t, func(t *testing.T, flavor providertest.Flavor) {
		s := newBodyScenario(t, flavor, providertest.ContextOverflow(500), "max_retries: 3, failure_threshold: 1")
		res := s.answer("overflow")
		first := res.Attempts[0]
		if res.Status != chain.StatusOK || res.Provider != "backup" || first.Class != chain.ClassRequest || first.StatusCode != 500 {
			t.Fatalf("status %s provider %q first attempt %+v; want backup after request 500", res.Status, res.Provider, first)
		}
		if got := s.primary.Requests(); got != 1 {
			t.Fatalf("primary received %d requests, want 1", got)
		}
		s.wantNothingWritten()
	})
}

// TestHTMLErrorPageKeepsOnlyItsTitle: a proxy's 502 page is reduced to the
// status and the page's title in the attempt and in the KV values.
func TestHTMLErrorPageKeepsOnlyItsTitle(t *testing.T) {
	const title = "example.com | 502: Bad gateway"
	forBothFlavors(t, func(t *testing.T, flavor providertest.Flavor) {
		s := newBodyScenario(t, flavor, providertest.HTMLError(502, title), "max_retries: 0, failure_threshold: 1, cooldown: 2s")
		res := s.answer("html")
		first := res.Attempts[0]
		if first.Class != chain.ClassServer || !strings.Contains(first.Error, "HTTP 502): "+title) {
			t.Fatalf("first attempt %+v; want server with the status and the title", first)
		}
		var health kvstate.Health
		var c kvstate.Cooldown
		if !s.kvValue(kvstate.HealthKey("primary"), &health) || !s.kvValue(kvstate.CooldownKey("primary"), &c) {
			t.Fatal("no health or cooldown written for a 502")
		}
		for what, text := range map[string]string{"attempt error": first.Error, "health last_error": health.LastError, "cooldown reason": c.Reason} {
			if strings.ContainsAny(text, "<>") || strings.Contains(text, "cf-error-details") || !strings.Contains(text, title) {
				t.Errorf("%s %q: want the title, no markup", what, text)
			}
		}
	})
}

// TestStoppedAnswersFallThroughWithoutCooling: an answer cut by a content
// filter (with partial text) or a refusal is invalid_output: the next
// provider answers, the attempt records the stop reason, nothing cools.
func TestStoppedAnswersFallThroughWithoutCooling(t *testing.T) {
	cases := []struct {
		name   string
		script providertest.Script
		stop   map[providertest.Flavor]string
	}{
		{"content filter", providertest.ContentFiltered("Here is the first half of"),
			map[providertest.Flavor]string{providertest.OpenAI: "content_filter", providertest.Anthropic: "refusal"}},
		{"refusal", providertest.Refusal("I can't help with that."),
			map[providertest.Flavor]string{providertest.OpenAI: "refusal", providertest.Anthropic: "refusal"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forBothFlavors(t, func(t *testing.T, flavor providertest.Flavor) {
				s := newBodyScenario(t, flavor, tc.script, "max_retries: 2, failure_threshold: 1")
				res := s.answer("stopped")
				first := res.Attempts[0]
				if res.Status != chain.StatusOK || res.Provider != "backup" || first.Class != chain.ClassInvalidOutput ||
					first.StopReason != tc.stop[flavor] || first.Error == "" {
					t.Fatalf("status %s provider %q first attempt %+v; want backup after invalid_output with stop_reason %q",
						res.Status, res.Provider, first, tc.stop[flavor])
				}
				if got := s.primary.Requests(); got != 1 {
					t.Fatalf("primary received %d requests, want 1", got)
				}
				s.wantNothingWritten()
			})
		})
	}
}

// TestWaitHintsAreHonoured: a decimal Retry-After (2.5, read as 3 s) and a
// lone retry-after-ms (3000) make the retry wait that long, as the fake
// server's arrival times show.
func TestWaitHintsAreHonoured(t *testing.T) {
	cases := []struct {
		name, header, value string
		wantMs              int64
	}{
		{"decimal Retry-After", "Retry-After", "2.5", 3000},
		{"retry-after-ms", "retry-after-ms", "3000", 3000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forBothFlavors(t, func(t *testing.T, flavor providertest.Flavor) {
				script := providertest.Sequence(providertest.WithHeader(tc.header, tc.value, providertest.Status(429)), providertest.OK())
				s := newBodyScenario(t, flavor, script, "max_retries: 1, max_retry_wait: 5s")
				res := s.answer("hint")
				if res.Provider != "primary" || res.Attempts[0].Class != chain.ClassRateLimit || res.Attempts[0].RetryAfterMs != tc.wantMs {
					t.Fatalf("provider %q attempts %+v; want primary after a rate_limit asking %d ms", res.Provider, res.Attempts, tc.wantMs)
				}
				got := s.primary.Received()
				if len(got) != 2 {
					t.Fatalf("primary received %d requests, want 2", len(got))
				}
				if gap := got[1].At.Sub(got[0].At); gap < time.Duration(tc.wantMs)*time.Millisecond {
					t.Fatalf("retried after %v, want at least %d ms", gap, tc.wantMs)
				}
			})
		})
	}
}
