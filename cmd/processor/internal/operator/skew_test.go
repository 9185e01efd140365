package operator_test

import (
	"context"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/kvstate/kvstatetest"
)

// TestAResetByABehindClockEndsTheCooldown: an operator whose clock runs
// two minutes behind the NATS server's resets a provider that a processor
// tripped a moment ago, and the processor calls it again: the reset is
// timed by the server's clock, after the failures it clears, not two
// minutes before them.
func TestAResetByABehindClockEndsTheCooldown(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	ctx := context.Background()
	kv, err := kvstate.OpenBucket(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	processor := kvstate.New(js, kv, kvstate.Options{ID: "proc-1"})
	kvstatetest.Follow(t, ctx, processor)
	err = processor.RecordFailure(ctx, "primary", chain.Failure{Class: chain.ClassAuth, Error: "auth (HTTP 401): invalid key",
		At: time.Now(), CooldownFor: 30 * time.Minute, Policy: chain.CooldownPolicy{FailureThreshold: 3, Cooldown: time.Minute, MaxCooldown: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}

	f := fleet(t)
	f.JS, f.Clock = js, func() time.Time { return time.Now().Add(-2 * time.Minute) }
	if _, err := f.Reset(ctx, []string{"primary"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for processor.State("primary", time.Now()) != kvstate.StateClosed {
		if time.Now().After(deadline) {
			t.Fatalf("primary still %s for the processor after the reset", processor.State("primary", time.Now()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
