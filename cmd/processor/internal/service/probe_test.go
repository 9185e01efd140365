package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/wire"
)

// cooldownOpened is one cooldown key seen by a test watcher, with the dead
// provider's request count at that moment.
type cooldownOpened struct {
	cooldown kvstate.Cooldown
	calls    int
}

// watchCooldowns reports every cooldown opened for provider until ctx ends.
func watchCooldowns(t *testing.T, ctx context.Context, js jetstream.JetStream, provider string, calls func() int) <-chan cooldownOpened {
	t.Helper()
	kv, err := js.KeyValue(ctx, kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, kvstate.CooldownKey(provider), jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan cooldownOpened, 64)
	go func() {
		defer w.Stop()
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var c kvstate.Cooldown
			if json.Unmarshal(e.Value(), &c) == nil {
				out <- cooldownOpened{cooldown: c, calls: calls()}
			}
		}
	}()
	return out
}

// steadyLoad publishes a request to the default chain every interval until
// ctx ends, counting them.
func steadyLoad(ctx context.Context, nc *nats.Conn, every time.Duration) *atomic.Int64 {
	var sent atomic.Int64
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			n := sent.Add(1)
			body, _ := json.Marshal(request(fmt.Sprintf("load-%d", n), "hello"))
			_ = nc.Publish(wire.RequestSubject("default"), body)
		}
	}()
	return &sent
}

func nextCooldown(t *testing.T, events <-chan cooldownOpened, timeout time.Duration) cooldownOpened {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(timeout):
		t.Fatalf("no cooldown opened within %s", timeout)
		return cooldownOpened{}
	}
}

// TestCooldownsEscalate is acceptance 4 of the failure-semantics issue: with
// cooldown 1s and max_cooldown 4s, successive trips of a provider that stays
// down give 1 s, 2 s, 4 s, 4 s.
func TestCooldownsEscalate(t *testing.T) {
	dead := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer dead.Close()
	backup := providertest.New(providertest.OpenAI, providertest.OK())
	defer backup.Close()
	h := newHarness(t)
	h.startProcessor(parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: dead, type: openai, base_url: %s, model: m1, max_retries: 0, failure_threshold: 1, cooldown: 1s, max_cooldown: 4s}
  - {name: backup, type: openai, base_url: %s, model: m2}
chains:
  default: [dead, backup]
`, dead.URL, backup.URL)), testSettings())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := watchCooldowns(t, ctx, h.js, "dead", dead.Requests)
	steadyLoad(ctx, h.nc, 50*time.Millisecond)

	var got []int64
	for trip := 1; trip <= 4; trip++ {
		e := nextCooldown(t, events, 15*time.Second)
		if e.cooldown.Trip != trip {
			t.Fatalf("cooldown %+v, want trip %d", e.cooldown, trip)
		}
		got = append(got, e.cooldown.DurationS)
	}
	if fmt.Sprint(got) != "[1 2 4 4]" {
		t.Fatalf("cooldowns of %v seconds, want [1 2 4 4]", got)
	}
}

// TestOneProbeAcrossProcessors is acceptance 5 of the failure-semantics
// issue: three processors with eight workers each under steady load send
// exactly one request (the probe) to a dead provider across each cooldown
// expiry, then a longer cooldown opens; once the provider recovers, the
// probe's success closes the circuit and traffic returns.
func TestOneProbeAcrossProcessors(t *testing.T) {
	dead := providertest.New(providertest.OpenAI, providertest.Status(503))
	defer dead.Close()
	backup := providertest.New(providertest.OpenAI, providertest.OK())
	defer backup.Close()
	h := newHarness(t)
	file := parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: dead, type: openai, base_url: %s, model: m-dead, timeout: 2s, max_retries: 0, failure_threshold: 1, cooldown: 2s, max_cooldown: 4s}
  - {name: backup, type: openai, base_url: %s, model: m-backup}
chains:
  default: [dead, backup]
`, dead.URL, backup.URL))
	var procs []*testProcessor
	for range 3 {
		p := h.buildProcessor(file, testSettings()) // 8 workers each
		p.run()
		procs = append(procs, p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := watchCooldowns(t, ctx, h.js, "dead", dead.Requests)

	// The first trip comes from one request alone, so no other call is in
	// flight when it opens.
	h.publish("default", request("first", "hello"))
	first := nextCooldown(t, events, 10*time.Second)
	if first.calls != 1 {
		t.Fatalf("first trip after %d calls, want 1", first.calls)
	}
	steadyLoad(ctx, h.nc, 20*time.Millisecond)

	prev := first
	for trip := 2; trip <= 3; trip++ {
		e := nextCooldown(t, events, 15*time.Second)
		if probes := e.calls - prev.calls; probes != 1 {
			t.Fatalf("across expiry %d the dead provider received %d requests, want exactly 1 (the probe)", trip-1, probes)
		}
		if e.cooldown.Trip != trip || e.cooldown.DurationS <= prev.cooldown.DurationS && prev.cooldown.DurationS < 4 {
			t.Fatalf("cooldown %+v after %+v: want trip %d and a longer cooldown", e.cooldown, prev.cooldown, trip)
		}
		prev = e
	}

	// The provider recovers during the third cooldown: the next probe
	// succeeds, closes the circuit everywhere, and traffic returns to it.
	dead.SetScript(providertest.OK())
	eventually(t, 15*time.Second, "the circuit to close on every processor", func() bool {
		for _, p := range procs {
			if p.StoreForTest().State("dead", time.Now()) != kvstate.StateClosed {
				return false
			}
		}
		return true
	})
	closedAt := dead.Requests()
	eventually(t, 10*time.Second, "traffic to return to the recovered provider", func() bool {
		return dead.Requests() >= closedAt+20
	})
	select {
	case e := <-events:
		t.Fatalf("a cooldown opened after recovery: %+v", e.cooldown)
	default:
	}
	h.publish("default", request("after", "hello"))
	if res, _ := h.waitResult("after", 10*time.Second); res.Provider != "dead" || res.Degraded || res.Status != chain.StatusOK {
		t.Fatalf("after recovery: %+v, want a first-choice answer from the recovered provider", res)
	}
}

// TestAProbeAfterACooldownOfItsOwnTrips: a 401 opens the auth cooldown at
// once, with one failure counted of a threshold of five. Across its expiry
// the dead provider receives one call, the probe, however many retries the
// provider allows, and the probe's failure opens the next, longer cooldown
// (docs/failures.md, Cooldowns). Before, probe after probe went to it until five failures
// had been counted.
func TestAProbeAfterACooldownOfItsOwnTrips(t *testing.T) {
	dead := providertest.New(providertest.OpenAI, providertest.FailFirst(1, providertest.Status(401), providertest.Status(503)))
	defer dead.Close()
	backup := providertest.New(providertest.OpenAI, providertest.OK())
	defer backup.Close()
	h := newHarness(t)
	file := parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: dead, type: openai, base_url: %s, model: m-dead, timeout: 2s, max_retries: 2, backoff_base: 10ms, failure_threshold: 5, cooldown: 2s, max_cooldown: 8s, auth_cooldown: 1s}
  - {name: backup, type: openai, base_url: %s, model: m-backup}
chains:
  default: [dead, backup]
`, dead.URL, backup.URL))
	for range 2 {
		h.buildProcessor(file, testSettings()).run()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := watchCooldowns(t, ctx, h.js, "dead", dead.Requests)

	h.publish("default", request("first", "hello"))
	auth := nextCooldown(t, events, 10*time.Second)
	if auth.calls != 1 || auth.cooldown.Class != chain.ClassAuth || auth.cooldown.DurationS != 1 {
		t.Fatalf("first trip %+v after %d calls, want the 1 s auth cooldown after 1", auth.cooldown, auth.calls)
	}
	steadyLoad(ctx, h.nc, 20*time.Millisecond)
	next := nextCooldown(t, events, 10*time.Second)
	if probes := next.calls - auth.calls; probes != 1 {
		t.Fatalf("across the auth cooldown's expiry the dead provider received %d requests, want exactly 1 (the probe)", probes)
	}
	if next.cooldown.Trip != 2 || next.cooldown.DurationS != 4 {
		t.Fatalf("the probe's failure opened %+v, want trip 2 of 4 s (cooldown 2s doubled)", next.cooldown)
	}
}

// TestOneCallPerReopenUnderSteadyLoad: two processors under steady load (50
// requests/s) send a dead provider exactly one call (the probe) per reopen,
// in every window, for 20 s. A trip that followed a probe used to be lost
// when the previous cooldown's key was still on the server (its TTL removal
// lags by up to a second), and every worker then probed in turn.
func TestOneCallPerReopenUnderSteadyLoad(t *testing.T) {
	dead := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer dead.Close()
	backup := providertest.New(providertest.OpenAI, providertest.OK())
	defer backup.Close()
	h := newHarness(t)
	file := parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: dead, type: openai, base_url: %s, model: m-dead, timeout: 2s, failure_threshold: 1, cooldown: 1s, max_cooldown: 2s}
  - {name: backup, type: openai, base_url: %s, model: m-backup}
chains:
  default: [dead, backup]
`, dead.URL, backup.URL))
	for range 2 {
		h.startProcessor(file, testSettings())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := watchCooldowns(t, ctx, h.js, "dead", dead.Requests)

	// The first trip comes from one request alone, so no other call is in
	// flight when it opens.
	h.publish("default", request("first", "hello"))
	prev := nextCooldown(t, events, 10*time.Second)
	if prev.calls != 1 || prev.cooldown.Trip != 1 {
		t.Fatalf("first cooldown %+v after %d calls, want trip 1 after 1", prev.cooldown, prev.calls)
	}
	loadCtx, stopLoad := context.WithTimeout(ctx, 20*time.Second)
	defer stopLoad()
	sent := steadyLoad(loadCtx, h.nc, 20*time.Millisecond)
	reopens := 0
	for {
		var e cooldownOpened
		select {
		case e = <-events:
		case <-loadCtx.Done():
		}
		if loadCtx.Err() != nil {
			break
		}
		// Each reopen costs exactly one call, its probe, whose failure is
		// the next trip: calls and trips between two cooldowns seen here
		// are equal, and one each unless this watcher skipped a cooldown.
		// (A KV watcher may: when it stalls under load and resumes, a key
		// replaced meanwhile is delivered at its latest value only.)
		trips := e.cooldown.Trip - prev.cooldown.Trip
		reopens += trips
		if calls := e.calls - prev.calls; calls != trips || trips < 1 {
			t.Errorf("after trip %d: the dead provider received %d calls until trip %d, want exactly one per reopen (%d)",
				prev.cooldown.Trip, calls, e.cooldown.Trip, trips)
		}
		if trips > 1 {
			t.Logf("the test's watcher skipped %d cooldown(s) before trip %d", trips-1, e.cooldown.Trip)
		}
		if want := min(int64(1)<<(e.cooldown.Trip-1), 2); e.cooldown.DurationS != want {
			t.Errorf("trip %d lasted %ds, want %ds", e.cooldown.Trip, e.cooldown.DurationS, want)
		}
		prev = e
	}
	// The last window is still open: at most its probe has been sent.
	if calls := dead.Requests() - prev.calls; calls > 1 {
		t.Errorf("after the last cooldown the dead provider received %d calls, want at most 1", calls)
	}
	if reopens < 8 {
		t.Errorf("%d reopens in 20 s with cooldowns of at most 2 s, want at least 8", reopens)
	}
	t.Logf("%d requests sent, %d reopens, %d calls to the dead provider", sent.Load(), reopens, dead.Requests())
}
