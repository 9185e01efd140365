package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/kvstate"
)

// TestMirrorFollowsWhileRunDrains: once Run's ctx ends, the processor is not
// ready and takes no new work, but its mirror keeps following the bucket
// while the call still in flight finishes, so a cooldown another processor
// opens meanwhile reaches it; the mirror stops with Run.
func TestMirrorFollowsWhileRunDrains(t *testing.T) {
	const callTime = 3 * time.Second
	slow := providertest.New(providertest.OpenAI, providertest.Slow(callTime, providertest.OK()))
	defer slow.Close()
	h := newHarness(t)
	file := parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: slow, type: openai, base_url: %s, model: m-slow, timeout: 10s}
chains:
  default: [slow]
`, slow.URL))
	settings := testSettings()
	settings.ShutdownTimeout = 2 * callTime
	// Assembled as cmd/processor does: one context for New and Run, which
	// the stop ends.
	p := h.assemble(file, settings, false)
	p.run()
	eventually(t, 5*time.Second, "the processor ready", p.Ready)

	h.publish("default", request("drained", "take your time"))
	eventually(t, 5*time.Second, "the call in flight", func() bool { return slow.InFlight() == 1 })
	stopped := make(chan struct{})
	go func() { // ends once Run has returned
		defer close(stopped)
		p.stop()
	}()
	eventually(t, time.Second, "the processor not ready once it stops", func() bool { return !p.Ready() })
	// The stop ends New's context too: the watch Load opened must not end
	// with it.
	for range 50 {
		if !p.StoreForTest().Following() {
			t.Fatal("the mirror stopped following at the stop, while a call was in flight")
		}
		time.Sleep(10 * time.Millisecond)
	}

	ctx := context.Background()
	kv, err := h.js.KeyValue(ctx, kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	other := kvstate.New(h.js, kv, kvstate.Options{ID: "other-processor"})
	err = other.RecordFailure(ctx, "elsewhere", chain.Failure{
		Class: chain.ClassServer, Error: "scenario outage", At: time.Now(), CooldownFor: time.Minute,
		Policy: chain.CooldownPolicy{FailureThreshold: 3, Cooldown: time.Minute, MaxCooldown: time.Hour, TripWindow: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "the draining processor's mirror to show the other's cooldown", func() bool {
		_, ok := p.StoreForTest().Cooling("elsewhere", time.Now())
		return ok
	})
	select {
	case <-stopped:
		t.Fatal("Run returned before the call in flight finished")
	default:
	}

	<-stopped
	if res, _ := h.waitResult("drained", time.Second); res.Status != chain.StatusOK {
		t.Fatalf("the call in flight at the stop: %+v, want answered", res)
	}
	if p.StoreForTest().Following() {
		t.Fatal("the mirror follows after Run returned")
	}
}
