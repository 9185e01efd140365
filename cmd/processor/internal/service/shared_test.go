package service_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

// TestCooldownIsSharedBetweenProcessors is acceptance 2 of the core issue:
// after processor A opens a cooldown, processor B sends no request to the dead
// provider, and B's mirror showed the cooldown within 100 ms.
func TestCooldownIsSharedBetweenProcessors(t *testing.T) {
	dead := providertest.New(providertest.OpenAI, providertest.Status(503))
	defer dead.Close()
	backup := providertest.New(providertest.OpenAI, providertest.OK())
	defer backup.Close()
	h := newHarness(t)
	file := parseChainFile(t, outageChain(dead.URL, backup.URL, 3))
	a := h.buildProcessor(file, testSettings())
	b := h.buildProcessor(file, testSettings()) // mirror live, not consuming yet

	// One poller watches both mirrors, so the gap between A holding the
	// cooldown and B seeing it is measured on one clock.
	seen := make(chan [2]time.Time, 1)
	go func() {
		var seenA, seenB time.Time
		for stop := time.Now().Add(15 * time.Second); time.Now().Before(stop) && (seenA.IsZero() || seenB.IsZero()); {
			now := time.Now()
			if _, ok := a.StoreForTest().Cooling("dead", now); ok && seenA.IsZero() {
				seenA = now
			}
			if _, ok := b.StoreForTest().Cooling("dead", now); ok && seenB.IsZero() {
				seenB = now
			}
			time.Sleep(200 * time.Microsecond)
		}
		seen <- [2]time.Time{seenA, seenB}
	}()

	a.run()
	h.publish("default", request("first", "hello"))
	if res, _ := h.waitResult("first", 10*time.Second); res.Provider != "backup" {
		t.Fatalf("first request answered by %q, want backup", res.Provider)
	}
	times := <-seen
	if times[0].IsZero() || times[1].IsZero() {
		t.Fatalf("cooldown not seen: A at %v, B at %v", times[0], times[1])
	}
	lag := times[1].Sub(times[0])
	t.Logf("B saw the cooldown %v after A", lag)
	if lag > 100*time.Millisecond {
		t.Fatalf("B saw the cooldown %v after A, want within 100ms", lag)
	}
	if got := dead.Requests(); got != 3 {
		t.Fatalf("dead received %d requests while A tripped it, want 3", got)
	}

	// From now on only B consumes.
	a.stop()
	b.run()
	for i := range 10 {
		id := fmt.Sprintf("b-%d", i)
		h.publish("default", request(id, "hello"))
		res, _ := h.waitResult(id, 10*time.Second)
		if res.Provider != "backup" || res.Attempts[0].Class != chain.ClassCooldown {
			t.Fatalf("%s: provider %q, first attempt %+v; want backup after a cooldown skip", id, res.Provider, res.Attempts[0])
		}
	}
	if got := dead.Requests(); got != 3 {
		t.Fatalf("dead received %d requests in all, want 3: B called it", got)
	}
}
