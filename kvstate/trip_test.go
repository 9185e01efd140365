package kvstate_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/kvstate/kvstatetest"
)

// putCooldown writes a cooldown key the way another processor would, with a
// server TTL of ttl.
func putCooldown(t *testing.T, e env, provider string, c kvstate.Cooldown, ttl time.Duration) uint64 {
	t.Helper()
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := e.kv.Create(e.ctx, kvstate.CooldownKey(provider), data, jetstream.KeyTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// storedCooldown reads the cooldown key from the server with its TTL header.
func storedCooldown(t *testing.T, e env, provider string) (kvstate.Cooldown, string) {
	t.Helper()
	s, err := e.js.Stream(e.ctx, "KV_"+kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(e.ctx, "$KV."+kvstate.Bucket+"."+kvstate.CooldownKey(provider))
	if err != nil {
		t.Fatalf("cooldown key of %s: %v", provider, err)
	}
	var c kvstate.Cooldown
	if err := json.Unmarshal(m.Data, &c); err != nil {
		t.Fatalf("cooldown %s: %v", m.Data, err)
	}
	return c, m.Header.Get(jetstream.MsgTTLHeader)
}

// TestStaleCooldownKeyIsReplaced: a trip that finds the previous cooldown's
// key still present (its until passed, the server has not removed it yet)
// replaces it with a fresh TTL instead of being dropped.
func TestStaleCooldownKeyIsReplaced(t *testing.T) {
	e := setup(t)
	a := e.store(t, "proc-a", nil)
	b := e.store(t, "proc-b", nil)
	// The previous trip's key: ended a moment ago, but its TTL keeps it on
	// the server for a while yet.
	stale := kvstate.Cooldown{Until: time.Now().Add(-time.Millisecond).UTC(), Class: chain.ClassServer, Trip: 1, DurationS: 1, By: "proc-x"}
	putCooldown(t, e, "p", stale, 30*time.Second)
	eventually(t, 3*time.Second, "A mirrors the stale key", func() bool {
		_, ok := a.CooldownForTest("p")
		return ok
	})

	p := policy(1, 2*time.Second)
	if err := a.RecordFailure(e.ctx, "p", serverFailure(p)); err != nil {
		t.Fatal(err)
	}
	got, ttl := storedCooldown(t, e, "p")
	if got.Trip != 1 || got.By != "proc-a" || got.DurationS != 2 || ttl != "2s" {
		t.Fatalf("cooldown after the trip = %+v with TTL %q, want proc-a's 2s trip with TTL 2s", got, ttl)
	}
	for name, s := range map[string]*kvstate.Store{"A": a, "B": b} {
		eventually(t, 3*time.Second, name+" skips the provider", func() bool {
			_, cooling := s.Cooling("p", time.Now())
			return cooling
		})
	}
}

// TestCooldownIsExtendedNeverShortened: a trip ending later than the running
// cooldown replaces it (a 401 during a 20 s Retry-After cooldown gets its
// 1 h auth cooldown); one ending sooner leaves it alone.
func TestCooldownIsExtendedNeverShortened(t *testing.T) {
	e := setup(t)
	a := e.store(t, "proc-a", nil)
	p := policy(3, 10*time.Second)
	p.AuthCooldown = time.Hour

	rateLimited := serverFailure(p)
	rateLimited.Class, rateLimited.CooldownFor = chain.ClassRateLimit, 20*time.Second
	if err := a.RecordFailure(e.ctx, "p", rateLimited); err != nil {
		t.Fatal(err)
	}
	if c, ttl := storedCooldown(t, e, "p"); c.DurationS != 20 || ttl != "20s" {
		t.Fatalf("Retry-After cooldown = %+v TTL %q, want 20s", c, ttl)
	}

	auth := serverFailure(p)
	auth.Class, auth.CooldownFor = chain.ClassAuth, p.AuthCooldown
	if err := a.RecordFailure(e.ctx, "p", auth); err != nil {
		t.Fatal(err)
	}
	c, ttl := storedCooldown(t, e, "p")
	if c.Class != chain.ClassAuth || c.DurationS != 3600 || ttl != "1h0m0s" || c.Trip != 2 {
		t.Fatalf("after a 401 during the 20s cooldown: %+v TTL %q, want the 1h auth cooldown (trip 2)", c, ttl)
	}
	if until, _ := a.Cooling("p", time.Now()); time.Until(until) < 59*time.Minute {
		t.Errorf("A cools until %v, want about an hour from now", until)
	}

	// A shorter forced cooldown during the hour changes nothing.
	rateLimited.At = time.Now()
	if err := a.RecordFailure(e.ctx, "p", rateLimited); err != nil {
		t.Fatal(err)
	}
	if c2, ttl := storedCooldown(t, e, "p"); c2 != c || ttl != "1h0m0s" {
		t.Errorf("a 20s cooldown during the 1h one rewrote it: %+v TTL %q", c2, ttl)
	}
}

// TestConcurrentTripsOverAStaleKey: processors that trip at once over a
// stale key end with one cooldown key, the longest asked for, and no error.
func TestConcurrentTripsOverAStaleKey(t *testing.T) {
	e := setup(t)
	stale := kvstate.Cooldown{Until: time.Now().Add(-time.Millisecond).UTC(), Class: chain.ClassServer, Trip: 1, DurationS: 1}
	putCooldown(t, e, "p", stale, 30*time.Second)
	var stores []*kvstate.Store
	for i := range 4 {
		stores = append(stores, e.store(t, fmt.Sprintf("proc-%d", i), nil))
	}
	p := policy(1, time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, len(stores))
	for i, s := range stores {
		wg.Go(func() {
			f := serverFailure(p)
			f.Class, f.CooldownFor = chain.ClassRateLimit, time.Duration(10+i)*time.Second
			errs <- s.RecordFailure(e.ctx, "p", f)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("RecordFailure: %v", err)
		}
	}
	c, _ := storedCooldown(t, e, "p")
	if c.DurationS != 13 {
		t.Errorf("cooldown after concurrent trips = %+v, want the longest (13s)", c)
	}
}

// TestHealthTripIsHonouredWithoutItsKey is the invariant: whenever a
// provider's health says a trip is running, every processor skips it, even
// one that never sees a cooldown key.
func TestHealthTripIsHonouredWithoutItsKey(t *testing.T) {
	e := setup(t)
	a := e.store(t, "proc-a", nil)
	b := e.store(t, "proc-b", nil)
	at := time.Now().UTC().Truncate(time.Millisecond)
	h := kvstate.Health{ConsecutiveFailures: 3, Trips: 2, LastTrip: at, LastTripS: 60, LastClass: chain.ClassServer}
	data, _ := json.Marshal(h)
	if _, err := e.kv.Put(e.ctx, kvstate.HealthKey("p"), data); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*kvstate.Store{"A": a, "B": b} {
		eventually(t, 3*time.Second, name+" mirrors the health", func() bool {
			_, ok := s.Health("p")
			return ok
		})
		if until, cooling := s.Cooling("p", time.Now()); !cooling || !until.Equal(at.Add(time.Minute)) {
			t.Errorf("%s: Cooling = %v %v, want until %v", name, until, cooling, at.Add(time.Minute))
		}
		if adm := s.Admit(e.ctx, "p", time.Now(), time.Second); adm.Allowed {
			t.Errorf("%s admitted a call during the trip the health records", name)
		}
		if st := s.State("p", time.Now()); st != kvstate.StateOpen {
			t.Errorf("%s: state %v, want open", name, st)
		}
		// After the trip the provider is half-open, not open.
		if st := s.State("p", at.Add(time.Minute)); st != kvstate.StateHalfOpen {
			t.Errorf("%s: state after the trip %v, want half-open", name, st)
		}
	}
}

// halfOpen stores the health of provider "p" with a trip of one minute,
// ten minutes ago, and returns a store of opts whose mirror shows p
// half-open, and when the trip was.
func halfOpen(t *testing.T, e env, opts kvstate.Options) (*kvstate.Store, time.Time) {
	t.Helper()
	at := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Millisecond)
	h := kvstate.Health{ConsecutiveFailures: 3, Trips: 1, LastTrip: at, LastTripS: 60, LastClass: chain.ClassServer}
	data, _ := json.Marshal(h)
	if _, err := e.kv.Put(e.ctx, kvstate.HealthKey("p"), data); err != nil {
		t.Fatal(err)
	}
	s := kvstate.New(e.js, e.kv, opts)
	kvstatetest.Follow(t, e.ctx, s)
	eventually(t, 3*time.Second, "the mirror holds the health", func() bool {
		return s.State("p", time.Now()) == kvstate.StateHalfOpen
	})
	return s, at
}

// TestALapsedProbeLeaseIsTakenOver: a probe key whose lease has lapsed is
// no lease, whether the server has not removed it yet or it has no TTL at
// all (written by hand). The next processor to admit the half-open
// provider replaces it at its revision, with a TTL, and probes; without
// that a key that never expires would keep the provider from ever being
// probed again.
func TestALapsedProbeLeaseIsTakenOver(t *testing.T) {
	e := setup(t)
	s, at := halfOpen(t, e, kvstate.Options{ID: "proc-a"})
	// Lapsed by less than the clocks of two processors may differ: its
	// holder may still be probing.
	putRaw(t, e, kvstate.ProbeKey("p"), fmt.Sprintf(`{"until":%q,"by":"other"}`, time.Now().Add(-10*time.Second).UTC().Format(time.RFC3339Nano)))
	if adm := s.Admit(e.ctx, "p", time.Now(), 5*time.Second); adm.Allowed {
		t.Fatalf("Admit over a lease lapsed 10 s ago = %+v, want it left to its holder", adm)
	}
	putRaw(t, e, kvstate.ProbeKey("p"), fmt.Sprintf(`{"until":%q,"by":"gone"}`, at.Add(61*time.Second).Format(time.RFC3339Nano)))
	adm := s.Admit(e.ctx, "p", time.Now(), 5*time.Second)
	if !adm.Allowed || !adm.Probe {
		t.Fatalf("Admit over a lapsed lease = %+v, want the probe", adm)
	}
	entry, err := e.kv.Get(e.ctx, kvstate.ProbeKey("p"))
	if err != nil {
		t.Fatal(err)
	}
	var p kvstate.Probe
	if err := json.Unmarshal(entry.Value(), &p); err != nil || p.By != "proc-a" {
		t.Fatalf("probe key %s (%v), want proc-a's lease", entry.Value(), err)
	}
	str, err := e.js.Stream(e.ctx, "KV_"+kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	m, err := str.GetLastMsgForSubject(e.ctx, "$KV."+kvstate.Bucket+"."+kvstate.ProbeKey("p"))
	if err != nil || m.Header.Get(jetstream.MsgTTLHeader) == "" {
		t.Errorf("the lease taken over: %v, headers %v; want a TTL", err, m)
	}
}

// TestReleasingALapsedLeaseLeavesTheNextLeaseAlone: two workers of one
// processor probe in turn when the first outlives its lease. The first's
// release, when its probe ends, must not delete the lease the second holds
// (a third worker would then probe too); the second's release does.
func TestReleasingALapsedLeaseLeavesTheNextLeaseAlone(t *testing.T) {
	e := setup(t)
	s, _ := halfOpen(t, e, kvstate.Options{ID: "proc"})
	now := time.Now()
	first := s.Admit(e.ctx, "p", now, 5*time.Second)
	if !first.Probe || first.Lease == 0 {
		t.Fatalf("first admission %+v, want the probe with its lease", first)
	}
	// The first worker is still calling when its lease has long lapsed.
	second := s.Admit(e.ctx, "p", now.Add(2*time.Minute), 5*time.Second)
	if !second.Probe || second.Lease == 0 || second.Lease == first.Lease {
		t.Fatalf("admission after the first lease lapsed %+v (first %+v), want a lease of its own", second, first)
	}
	if err := s.ReleaseProbe(e.ctx, "p", first.Lease); err != nil {
		t.Fatal(err)
	}
	entry, err := e.kv.Get(e.ctx, kvstate.ProbeKey("p"))
	if err != nil || entry.Revision() != second.Lease {
		t.Fatalf("after the first worker's release the lease is %v (%v), want the second's at revision %d", entry, err, second.Lease)
	}
	if err := s.ReleaseProbe(e.ctx, "p", second.Lease); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kv.Get(e.ctx, kvstate.ProbeKey("p")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("after the second worker's release: %v, want the lease gone", err)
	}
}

// TestAProbesSuccessIsLogged: the success that closes a half-open circuit
// is logged, as the probe that preceded it is; a success that only resets
// failures short of a trip is not.
func TestAProbesSuccessIsLogged(t *testing.T) {
	e := setup(t)
	var logs bytes.Buffer
	s, _ := halfOpen(t, e, kvstate.Options{ID: "proc", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := s.RecordSuccess(e.ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `msg="provider answered after its cooldown; circuit closed" provider=p`) {
		t.Fatalf("no log of the circuit closing:\n%s", logs.String())
	}
	logs.Reset()
	if err := s.RecordFailure(e.ctx, "q", serverFailure(policy(3, time.Minute))); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordSuccess(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "circuit closed") {
		t.Fatalf("a success short of a trip logged a circuit closing:\n%s", logs.String())
	}
}

// probedBehindAStaleMirror returns a store B whose mirror is a snapshot of
// a half-open provider p with no lease, taken before another store A
// probes p, records the probe's outcome and releases the lease.
func probedBehindAStaleMirror(t *testing.T, e env, outcome func(a *kvstate.Store) error) *kvstate.Store {
	t.Helper()
	a, _ := halfOpen(t, e, kvstate.Options{ID: "proc-a"})
	b := kvstate.New(e.js, e.kv, kvstate.Options{ID: "proc-b"})
	if err := b.Load(e.ctx); err != nil {
		t.Fatal(err)
	}
	probe := a.Admit(e.ctx, "p", time.Now(), 5*time.Second)
	if !probe.Probe {
		t.Fatalf("A's admission %+v, want the probe", probe)
	}
	if err := outcome(a); err != nil {
		t.Fatal(err)
	}
	if err := a.ReleaseProbe(e.ctx, "p", probe.Lease); err != nil {
		t.Fatal(err)
	}
	if b.State("p", time.Now()) != kvstate.StateHalfOpen {
		t.Fatalf("B's snapshot is %s, want half-open", b.State("p", time.Now()))
	}
	return b
}

// TestALeaseFreedByAProbesTripIsNoProbe: a processor whose mirror has not
// yet seen the trip another's probe recorded finds the lease free, the
// probe having released it; the trip ended the half-open state all the
// same, so it takes no probe, and the lease it won is given back.
func TestALeaseFreedByAProbesTripIsNoProbe(t *testing.T) {
	e := setup(t)
	b := probedBehindAStaleMirror(t, e, func(a *kvstate.Store) error {
		return a.RecordFailure(e.ctx, "p", serverFailure(policy(1, time.Minute)))
	})

	adm := b.Admit(e.ctx, "p", time.Now(), 5*time.Second)
	if adm.Allowed {
		t.Fatalf("B admitted %+v while the probe's trip runs", adm)
	}
	if h, _ := getHealth(t, e, "p"); !adm.Until.Equal(h.LastTrip.Add(time.Duration(h.LastTripS) * time.Second)) {
		t.Errorf("B's admission until %v, want the trip's end", adm.Until)
	}
	if _, err := e.kv.Get(e.ctx, kvstate.ProbeKey("p")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("probe key after B's refusal: %v, want none", err)
	}
}

// TestALeaseFreedByAProbesSuccessIsAPlainCall: as above, but the probe
// succeeded and closed the circuit: the call goes through, as no probe.
func TestALeaseFreedByAProbesSuccessIsAPlainCall(t *testing.T) {
	e := setup(t)
	b := probedBehindAStaleMirror(t, e, func(a *kvstate.Store) error { return a.RecordSuccess(e.ctx, "p") })

	if adm := b.Admit(e.ctx, "p", time.Now(), 5*time.Second); !adm.Allowed || adm.Probe {
		t.Fatalf("B admitted %+v after the probe closed the circuit, want a plain call", adm)
	}
	if b.State("p", time.Now()) != kvstate.StateClosed {
		t.Errorf("B's state %s, want closed", b.State("p", time.Now()))
	}
	if _, err := e.kv.Get(e.ctx, kvstate.ProbeKey("p")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("probe key after B's plain call: %v, want none", err)
	}
}
