package service_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/kvstate"
)

// The scenarios of this file are answers that did not end complete
// (docs/failures.md, stop reasons), through a processor on a real NATS
// server with the real KV state, for both adapters.

// fragment is the text OpenRouter had relayed when its upstream died.
const fragment = "The three primary colours of light are red, gre"

// TestAnAnswerThatDiedMidwayIsAServerFailure: a 200 whose choice ends
// with finish_reason "error" and an error object of code 502 beside the
// text already written is not ok: it is a server failure, counted against
// the provider, and the next provider answers; the fragment reaches no
// result.
func TestAnAnswerThatDiedMidwayIsAServerFailure(t *testing.T) {
	forBothFlavors(t, func(t *testing.T, flavor providertest.Flavor) {
		s := newBodyScenario(t, flavor, providertest.DiedMidAnswer(fragment, 502), "max_retries: 0, failure_threshold: 3, cooldown: 30s")
		res := s.answer("died")
		first := res.Attempts[0]
		if res.Status != chain.StatusOK || res.Provider != "backup" || strings.Contains(res.Content, "gre") {
			t.Fatalf("result %+v, want backup's answer without the fragment", res)
		}
		if first.Class != chain.ClassServer || first.StatusCode != 200 || first.StopReason != "error" || !strings.Contains(first.Error, "Provider returned error") {
			t.Fatalf("first attempt %+v, want server on a 200, stop reason error, the upstream message kept", first)
		}
		var h kvstate.Health
		if !s.kvValue(kvstate.HealthKey("primary"), &h) || h.ConsecutiveFailures != 1 || h.LastClass != chain.ClassServer {
			t.Fatalf("health %+v, want one counted server failure", h)
		}
	})
}

// TestAnEmptyAnswerThatDiedCoolsTheProvider: the same ending with no text
// is the same server failure, not an empty answer: failure_threshold
// requests cool the provider, and the next request skips it.
func TestAnEmptyAnswerThatDiedCoolsTheProvider(t *testing.T) {
	forBothFlavors(t, func(t *testing.T, flavor providertest.Flavor) {
		s := newBodyScenario(t, flavor, providertest.DiedMidAnswer("", 502), "max_retries: 0, failure_threshold: 3, cooldown: 30s")
		for i := range 3 {
			res := s.answer(fmt.Sprintf("empty-%d", i))
			if first := res.Attempts[0]; res.Provider != "backup" || first.Class != chain.ClassServer {
				t.Fatalf("request %d: provider %q, first attempt %+v; want backup after a server failure", i, res.Provider, first)
			}
		}
		var c kvstate.Cooldown
		if !s.kvValue(kvstate.CooldownKey("primary"), &c) || c.Class != chain.ClassServer {
			t.Fatalf("cooldown %+v, want one opened by server at failure_threshold", c)
		}
		if res := s.answer("skipped"); res.Provider != "backup" || res.Attempts[0].Class != chain.ClassCooldown {
			t.Fatalf("after the trip: %+v, want primary skipped for its cooldown", res.Attempts)
		}
		if got := s.primary.Requests(); got != 3 {
			t.Fatalf("primary received %d requests, want 3 (failure_threshold)", got)
		}
	})
}
