package service_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/kvstate"
)

// TestAllCoolingWaitsForTheEarliestReopen is acceptance 3 of the core issue:
// a request that finds every provider cooling is NAK'd once with a delay that
// ends at the earliest reopen, no provider is called while it waits, it is
// answered after the reopen, and the cooldown keys end by TTL alone.
func TestAllCoolingWaitsForTheEarliestReopen(t *testing.T) {
	one := providertest.New(providertest.OpenAI, providertest.OK())
	defer one.Close()
	two := providertest.New(providertest.OpenAI, providertest.OK())
	defer two.Close()
	h := newHarness(t)
	file := parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: one, type: openai, base_url: %s, model: m1, cooldown: 2s}
  - {name: two, type: openai, base_url: %s, model: m2, cooldown: 2s}
chains:
  default: [one, two]
`, one.URL, two.URL))
	p := h.startProcessor(file, testSettings())

	ctx := context.Background()
	for _, name := range []string{"one", "two"} {
		err := p.StoreForTest().RecordFailure(ctx, name, chain.Failure{
			Class: chain.ClassServer, Error: "scenario outage", CooldownFor: 2 * time.Second,
			Policy: chain.CooldownPolicy{FailureThreshold: 3, Cooldown: 2 * time.Second, MaxCooldown: time.Minute, TripWindow: time.Hour},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	c1, ok1 := mirroredCooldown(p.StoreForTest(), "one")
	c2, ok2 := mirroredCooldown(p.StoreForTest(), "two")
	if !ok1 || !ok2 {
		t.Fatal("cooldowns not in the mirror after opening them")
	}
	reopen := c1.Until
	if c2.Until.Before(reopen) {
		reopen = c2.Until
	}

	h.publish("default", request("waits", "hello"))
	res, _ := h.waitResult("waits", 15*time.Second)
	answered := time.Now()
	if res.Status != chain.StatusOK || res.Provider != "one" {
		t.Fatalf("got %s from %q, want ok from one", res.Status, res.Provider)
	}
	if res.Deliveries != 2 {
		t.Fatalf("deliveries = %d, want 2 (one NAK with delay)", res.Deliveries)
	}
	if gap := answered.Sub(reopen); gap < -time.Second || gap > time.Second {
		t.Fatalf("answered %v from the earliest reopen, want within ±1s", gap)
	}
	if calls := one.Requests() + two.Requests(); calls != 1 {
		t.Fatalf("providers received %d calls, want 1 (none while cooling)", calls)
	}

	kv, err := h.js.KeyValue(ctx, kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "cooldown keys to expire", func() bool {
		for _, name := range []string{"one", "two"} {
			_, err := kv.Get(ctx, kvstate.CooldownKey(name))
			if !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted) {
				return false
			}
			if _, ok := mirroredCooldown(p.StoreForTest(), name); ok {
				return false
			}
		}
		return true
	})
}
