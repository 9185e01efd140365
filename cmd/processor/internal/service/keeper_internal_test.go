package service

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/kvstate/kvstatetest"
)

// Fingerprints of three definitions of primary: this processor's, the
// holder's, and a third that runs elsewhere.
const (
	mineFP   = "1111111111111111"
	theirsFP = "2222222222222222"
	thirdFP  = "3333333333333333"
)

// keeperScene is a circuit keeper of this processor's definition of
// primary on a real bucket, and another processor's store on it, which
// writes what the keeper's mirror follows.
type keeperScene struct {
	t      *testing.T
	ctx    context.Context
	kv     jetstream.KeyValue
	store  *kvstate.Store
	other  *kvstate.Store
	keeper *circuitKeeper
	logs   *syncBuffer
}

// syncBuffer is a log's buffer that the test reads while the keeper writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newKeeperScene(t *testing.T) *keeperScene {
	t.Helper()
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kv, err := kvstate.OpenBucket(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	store := kvstate.New(js, kv, kvstate.Options{ID: "me"})
	kvstatetest.Follow(t, ctx, store)
	other := kvstate.New(js, kv, kvstate.Options{ID: "them"})
	kvstatetest.Follow(t, ctx, other)
	logs := &syncBuffer{}
	k := &circuitKeeper{store: store, own: map[string]kvstate.Holder{"primary": {Fingerprint: mineFP, By: "me"}}, now: time.Now,
		logger: slog.New(slog.NewTextHandler(logs, nil)), kept: map[string]string{}, unheard: map[string]bool{}}
	return &keeperScene{t: t, ctx: ctx, kv: kv, store: store, other: other, keeper: k, logs: logs}
}

// waitFor waits until cond holds, for at most 5 s.
func (s *keeperScene) waitFor(what string, cond func() bool) {
	s.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// fail records a failure of circuit by the other store, an auth failure
// (an hour's cooldown at once) when cool is set, else one of three
// failures that trip.
func (s *keeperScene) fail(circuit string, cool bool) {
	s.t.Helper()
	f := chain.Failure{Class: chain.ClassServer, Error: "server (HTTP 500)", At: time.Now(),
		Policy: chain.CooldownPolicy{FailureThreshold: 3, Cooldown: time.Minute, MaxCooldown: time.Hour, TripWindow: time.Hour}}
	if cool {
		f.Class, f.Error, f.CooldownFor = chain.ClassAuth, "auth (HTTP 401)", time.Hour
	}
	if err := s.other.RecordFailure(s.ctx, circuit, f); err != nil {
		s.t.Fatal(err)
	}
	s.waitFor("the keeper's mirror has "+circuit+"'s failure", func() bool {
		_, cooling := s.store.Cooling(circuit, time.Now())
		h, _ := s.store.Health(circuit)
		return h.ConsecutiveFailures > 0 && cooling == cool
	})
}

// theyHold makes the holder's definition hold primary.
func (s *keeperScene) theyHold() {
	s.t.Helper()
	if err := s.other.Claim(s.ctx, "primary", kvstate.Holder{Fingerprint: theirsFP, By: "them"}); err != nil {
		s.t.Fatal(err)
	}
	s.waitFor("the keeper's mirror knows the holder", func() bool {
		h, _ := s.store.Holder("primary")
		return h.Fingerprint == theirsFP
	})
}

// holder is the fingerprint that holds primary after a check that found
// others, complete or not.
func (s *keeperScene) holder(others []fleet.Instance, complete bool) string {
	s.keeper.round(s.ctx, others, complete)
	h, _ := s.store.Holder("primary")
	return h.Fingerprint
}

// running is an announcement of primary as the definition fingerprint.
func running(fingerprint string) []fleet.Instance {
	return []fleet.Instance{{Processor: "p-" + fingerprint[:4], Providers: map[string]fleet.Definition{"primary": {Fingerprint: fingerprint}}}}
}

// TestTheKeeperTakesOverAtTheSecondCompleteCheckUnheard: the holder's
// definition is taken over only at the second complete check in a row
// that no running processor announced it at, although another definition
// of the name runs elsewhere; a check that heard it, or an incomplete one,
// starts the count again.
func TestTheKeeperTakesOverAtTheSecondCompleteCheckUnheard(t *testing.T) {
	s := newKeeperScene(t)
	s.theyHold()
	s.fail("primary", false)
	elsewhere := running(thirdFP)
	for i, check := range []struct {
		others   []fleet.Instance
		complete bool
	}{{elsewhere, true}, {running(theirsFP), true}, {elsewhere, true}, {elsewhere, false}, {elsewhere, true}} {
		if got := s.holder(check.others, check.complete); got != theirsFP {
			t.Fatalf("check %d: primary held by %q, want the holder still", i+1, got)
		}
	}
	if got := s.holder(elsewhere, true); got != mineFP {
		t.Fatalf("the second complete check in a row without the holder: primary held by %q, want this definition", got)
	}
	if _, ok := s.store.Health("primary"); ok {
		t.Error("the old holder's health is still there after the take-over")
	}
	if !strings.Contains(s.logs.String(), "takes its name's circuit over") {
		t.Errorf("no take-over logged:\n%s", s.logs.String())
	}
}

// TestTheKeeperWaitsForItsOwnCircuitToBeUnused: a definition whose own
// circuit has a failure counted does not take the name over, however many
// checks miss the holder, until a success resets it.
func TestTheKeeperWaitsForItsOwnCircuitToBeUnused(t *testing.T) {
	s := newKeeperScene(t)
	s.theyHold()
	own := kvstate.DefinitionCircuit("primary", mineFP)
	s.fail(own, false)
	for i := range 4 {
		if got := s.holder(nil, true); got != theirsFP {
			t.Fatalf("check %d: primary held by %q while this definition's own circuit counts a failure", i+1, got)
		}
	}
	if err := s.other.RecordSuccess(s.ctx, own); err != nil {
		t.Fatal(err)
	}
	s.waitFor("the keeper's mirror has the success", func() bool {
		h, _ := s.store.Health(own)
		return h.ConsecutiveFailures == 0
	})
	if got := s.holder(nil, true); got != mineFP {
		t.Errorf("once its own circuit is unused: primary held by %q, want this definition", got)
	}
}

// TestTheKeeperNeverTakesACoolingCircuit: a holder whose cooldown runs
// keeps the name, however many checks miss it: its processors may be
// restarting, and they must find their cooldown.
func TestTheKeeperNeverTakesACoolingCircuit(t *testing.T) {
	s := newKeeperScene(t)
	s.theyHold()
	s.fail("primary", true)
	for i := range 4 {
		if got := s.holder(nil, true); got != theirsFP {
			t.Fatalf("check %d: primary held by %q while it cools", i+1, got)
		}
	}
	if _, cooling := s.store.Cooling("primary", time.Now()); !cooling {
		t.Error("the holder's cooldown was cleared")
	}
}

// TestTheKeeperClearsAGoneCircuitAtTheSecondCheck: another definition's
// circuit that no running processor announces is cleared at the second
// complete check in a row that misses it, not before, and never while it
// cools.
func TestTheKeeperClearsAGoneCircuitAtTheSecondCheck(t *testing.T) {
	s := newKeeperScene(t)
	s.theyHold()
	const gone, cooling = "primary=0a0b0c0d", "primary=0e0e0e0e"
	s.fail(gone, false)
	s.fail(cooling, true)
	has := func(c string) bool { _, ok := s.store.Health(c); return ok }
	heardGone := running("0a0b0c0d00000000")
	for i, check := range []struct {
		others   []fleet.Instance
		complete bool
	}{{nil, true}, {heardGone, true}, {nil, true}, {nil, false}, {nil, true}} {
		s.keeper.round(s.ctx, append(check.others, running(theirsFP)...), check.complete)
		if !has(gone) {
			t.Fatalf("check %d: %s cleared too soon", i+1, gone)
		}
	}
	s.keeper.round(s.ctx, running(theirsFP), true)
	if has(gone) {
		t.Errorf("%s kept after two complete checks in a row missed it", gone)
	}
	if !has(cooling) {
		t.Errorf("%s cleared while it cools", cooling)
	}
}

// TestTheKeeperWarnsOfACircuitOfItsOwn: a definition that another holds
// the name against logs, at warn, the circuit it keeps.
func TestTheKeeperWarnsOfACircuitOfItsOwn(t *testing.T) {
	s := newKeeperScene(t)
	s.theyHold()
	s.keeper.round(s.ctx, running(theirsFP), true)
	logged := s.logs.String()
	if !strings.Contains(logged, "level=WARN") || !strings.Contains(logged, "keeps a circuit of its own") ||
		!strings.Contains(logged, `circuit="primary=11111111"`) {
		t.Errorf("logged:\n%s\nwant a warning naming the circuit primary=11111111", logged)
	}
}
