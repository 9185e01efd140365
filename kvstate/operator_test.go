package kvstate_test

import (
	"bytes"
	"errors"
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

// operatorStore is the store `processor reset` and `processor trip` use: it
// writes, and reads a snapshot of the bucket (Load, no Run).
func (e env) operatorStore(t *testing.T) *kvstate.Store {
	t.Helper()
	s := kvstate.New(e.js, e.kv, kvstate.Options{})
	if err := s.Load(e.ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// authFailure is a 401 that opens the hour-long auth cooldown at once.
func authFailure() chain.Failure {
	return chain.Failure{Class: chain.ClassAuth, Error: "auth (HTTP 401): invalid api key", At: time.Now(), Started: time.Now(),
		CooldownFor: time.Hour, Policy: policy(3, time.Minute)}
}

// bucketRevision is the last revision written to the bucket.
func bucketRevision(t *testing.T, e env) uint64 {
	t.Helper()
	s, err := e.js.Stream(e.ctx, "KV_"+kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// TestResetEndsAnAuthCooldownForEveryProcessor: a provider cooling for an
// hour after a 401 is closed on every processor's mirror once reset: its
// cooldown key is gone, its health holds only the reset, and each
// processor logs who reset it.
func TestResetEndsAnAuthCooldownForEveryProcessor(t *testing.T) {
	e := setup(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	a := kvstate.New(e.js, e.kv, kvstate.Options{ID: "proc-a", Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))})
	kvstatetest.Follow(t, e.ctx, a)
	b := e.store(t, "proc-b", nil)
	if err := a.RecordFailure(e.ctx, "p", authFailure()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "b to see the auth cooldown", func() bool { return b.State("p", time.Now()) == kvstate.StateOpen })

	out, err := e.operatorStore(t).Reset(e.ctx, "p", "alice@host")
	if err != nil {
		t.Fatal(err)
	}
	if !out.Done || out.Before.State != kvstate.StateOpen || out.Before.Cooldown == nil || out.Before.Cooldown.Class != chain.ClassAuth {
		t.Fatalf("reset outcome %+v, want done, from open with the auth cooldown", out)
	}
	for name, s := range map[string]*kvstate.Store{"a": a, "b": b} {
		eventually(t, 2*time.Second, name+" to see the provider closed", func() bool {
			_, cooling := s.Cooling("p", time.Now())
			return !cooling && s.State("p", time.Now()) == kvstate.StateClosed
		})
		if adm := s.Admit(e.ctx, "p", time.Now(), time.Second); !adm.Allowed || adm.Probe {
			t.Errorf("%s admits the reset provider as %+v, want a plain call", name, adm)
		}
	}
	if _, err := e.kv.Get(e.ctx, kvstate.CooldownKey("p")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("cooldown key after the reset: %v, want it deleted", err)
	}
	h, _ := getHealth(t, e, "p")
	if h.ConsecutiveFailures != 0 || h.Trips != 0 || !h.LastTrip.IsZero() || h.LastError != "" || h.ResetBy != "alice@host" || h.ResetAt.IsZero() {
		t.Errorf("health after the reset %+v, want only the reset by alice@host", h)
	}
	eventually(t, 2*time.Second, "a to log the reset", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), `msg="provider reset by an operator: cooldown ended, failures and trips cleared" provider=p by=alice@host`)
	})
	// The next 401 opens the auth cooldown again: the reset forgave the
	// past, not the future. A call begun in the reset's own millisecond
	// counts as begun before it (afterReset rounds the reset up), so this
	// one begins after.
	for !time.Now().After(h.ResetAt) {
		time.Sleep(time.Millisecond)
	}
	if err := b.RecordFailure(e.ctx, "p", authFailure()); err != nil {
		t.Fatal(err)
	}
	if _, cooling := b.Cooling("p", time.Now()); !cooling {
		t.Error("a 401 after the reset opened no cooldown")
	}
}

// TestResetOfAProviderWithNothingToReset writes nothing and says so.
func TestResetOfAProviderWithNothingToReset(t *testing.T) {
	e := setup(t)
	s := e.store(t, "proc", nil)
	// A failure short of the threshold, then a success: closed, nothing
	// counted, no trip.
	if err := s.RecordFailure(e.ctx, "q", serverFailure(policy(3, time.Minute))); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordSuccess(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	before := bucketRevision(t, e)
	for _, name := range []string{"never-seen", "q"} {
		out, err := e.operatorStore(t).Reset(e.ctx, name, "alice@host")
		if err != nil || out.Done || out.Before.State != kvstate.StateClosed {
			t.Errorf("reset of %s: %+v, %v; want nothing done, closed", name, out, err)
		}
	}
	if after := bucketRevision(t, e); after != before {
		t.Errorf("resets with nothing to reset wrote to the bucket: revision %d, was %d", after, before)
	}
}

// TestResetWhileAProbeLeaseIsHeld: a reset of a half-open provider whose
// probe is in flight closes it at once for everyone, deletes the lease,
// and the probe's outcome changes nothing: its failure began before the
// reset and is not counted, and its release finds nothing to release.
func TestResetWhileAProbeLeaseIsHeld(t *testing.T) {
	e := setup(t)
	a, _ := halfOpen(t, e, kvstate.Options{ID: "proc-a"})
	b := e.store(t, "proc-b", nil)
	started := time.Now()
	probe := a.Admit(e.ctx, "p", started, 5*time.Second)
	if !probe.Probe {
		t.Fatalf("admission %+v, want the probe", probe)
	}
	eventually(t, 2*time.Second, "b to see the lease", func() bool { return !b.Admit(e.ctx, "p", time.Now(), 5*time.Second).Allowed })

	out, err := e.operatorStore(t).Reset(e.ctx, "p", "alice@host")
	if err != nil || !out.Done || out.Before.State != kvstate.StateHalfOpen {
		t.Fatalf("reset: %+v, %v; want done, from half-open", out, err)
	}
	eventually(t, 2*time.Second, "b to see the provider closed", func() bool {
		adm := b.Admit(e.ctx, "p", time.Now(), 5*time.Second)
		return adm.Allowed && !adm.Probe
	})
	if _, err := e.kv.Get(e.ctx, kvstate.ProbeKey("p")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("probe key after the reset: %v, want it deleted", err)
	}
	eventually(t, 2*time.Second, "a to see the reset", func() bool { h, _ := a.Health("p"); return h.ResetBy != "" })
	failed := chain.Failure{Class: chain.ClassServer, Error: "503", Started: started, At: time.Now(), Policy: policy(1, time.Minute)}
	if err := a.RecordFailure(e.ctx, "p", failed); err != nil {
		t.Fatal(err)
	}
	if err := a.ReleaseProbe(e.ctx, "p", probe.Lease); err != nil {
		t.Fatalf("releasing the lease the reset deleted: %v", err)
	}
	if h, _ := getHealth(t, e, "p"); h.ConsecutiveFailures != 0 || h.Trips != 0 {
		t.Errorf("health after the probe failed: %+v, want the reset's, the failure not counted", h)
	}
	if a.State("p", time.Now()) != kvstate.StateClosed || b.State("p", time.Now()) != kvstate.StateClosed {
		t.Errorf("states after the probe's outcome: %s, %s; want closed", a.State("p", time.Now()), b.State("p", time.Now()))
	}
}

// TestResetRacingFailures: a reset and failures of calls that began before
// it, recorded concurrently by two processors, end the same in any order,
// through compare-and-set on the health: closed, nothing counted. A
// cooldown key that such a trip writes after the reset deleted the key is
// over all the same.
func TestResetRacingFailures(t *testing.T) {
	e := setup(t)
	a := e.store(t, "proc-a", nil)
	b := e.store(t, "proc-b", nil)
	if err := a.RecordFailure(e.ctx, "p", authFailure()); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	op := e.operatorStore(t)
	// Six workers each record ten failures of calls that began before the
	// reset; the reset runs once each has recorded its first, so that
	// failures land on both sides of it.
	var wg sync.WaitGroup
	var first sync.WaitGroup
	for _, s := range []*kvstate.Store{a, b, a, b, a, b} {
		first.Add(1)
		wg.Go(func() {
			for i := range 10 {
				f := authFailure()
				f.Started, f.At = started, time.Now()
				if err := s.RecordFailure(e.ctx, "p", f); err != nil {
					t.Error(err)
				}
				if i == 0 {
					first.Done()
				}
			}
		})
	}
	first.Wait()
	time.Sleep(time.Millisecond) // the reset comes after the calls began
	if _, err := op.Reset(e.ctx, "p", "alice@host"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	h, _ := getHealth(t, e, "p")
	if h.ResetBy != "alice@host" || h.ConsecutiveFailures != 0 || h.Trips != 0 {
		t.Fatalf("health after the race %+v, want the reset's alone", h)
	}
	// A trip that raced the reset may have written its key after the
	// reset deleted it; if none did, one is written so now.
	if _, err := e.kv.Get(e.ctx, kvstate.CooldownKey("p")); errors.Is(err, jetstream.ErrKeyNotFound) {
		putCooldown(t, e, "p", kvstate.Cooldown{Until: started.Add(time.Hour), DurationS: 3600, Class: chain.ClassAuth, Trip: 1, By: "proc-a"}, time.Hour)
	} else if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*kvstate.Store{"a": a, "b": b} {
		eventually(t, 2*time.Second, name+" to hold the racing key", func() bool { _, ok := s.CooldownForTest("p"); return ok })
		if st := s.State("p", time.Now()); st != kvstate.StateClosed {
			t.Errorf("%s: %s with a cooldown key opened before the reset, want closed", name, st)
		}
		if rows := s.Status(time.Now()); len(rows) != 1 || rows[0].Cooldown != nil || !rows[0].CooldownUntil.IsZero() {
			t.Errorf("%s: status %+v, want no cooldown", name, rows)
		}
	}
	// A later trip replaces that key rather than keep it as running longer.
	if err := a.RecordFailure(e.ctx, "p", serverFailure(policy(1, time.Minute))); err != nil {
		t.Fatal(err)
	}
	if c, _ := storedCooldown(t, e, "p"); c.Class != chain.ClassServer || c.DurationS != 60 {
		t.Errorf("cooldown after a trip past the reset: %+v, want the new one-minute trip", c)
	}
}

// TestTripOpensAnOperatorsCooldown: an operator's trip makes every
// processor skip the provider, names the operator and the reason in the
// key, is logged by the processors that see it, and when it ends the
// provider is half-open: the next call is a probe.
func TestTripOpensAnOperatorsCooldown(t *testing.T) {
	e := setup(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	a := kvstate.New(e.js, e.kv, kvstate.Options{ID: "proc-a", Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))})
	kvstatetest.Follow(t, e.ctx, a)
	b := e.store(t, "proc-b", nil)
	out, err := e.operatorStore(t).Trip(e.ctx, "p", kvstate.OperatorTrip{For: 2 * time.Second, Reason: "maintenance", By: "alice@host", HalfOpen: true})
	if err != nil || !out.Opened || out.Cooldown == nil {
		t.Fatalf("trip: %+v, %v", out, err)
	}
	c, ttl := storedCooldown(t, e, "p")
	if !c.Operator || c.By != "alice@host" || c.Reason != "maintenance" || c.DurationS != 2 || c.Trip != 0 || c.Class != chain.ClassNone || ttl != "2s" {
		t.Fatalf("cooldown key %+v with TTL %q, want the operator's of 2s", c, ttl)
	}
	for name, s := range map[string]*kvstate.Store{"a": a, "b": b} {
		eventually(t, 2*time.Second, name+" to skip the provider", func() bool {
			return !s.Admit(e.ctx, "p", time.Now(), time.Second).Allowed
		})
	}
	eventually(t, 2*time.Second, "a to log the trip", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), `msg="provider tripped by an operator" provider=p`) && strings.Contains(logs.String(), "by=alice@host")
	})
	eventually(t, 5*time.Second, "the operator's cooldown to end", func() bool { return b.State("p", time.Now()) == kvstate.StateHalfOpen })
	adm := b.Admit(e.ctx, "p", time.Now(), time.Second)
	if !adm.Probe {
		t.Fatalf("first admission after the operator's cooldown: %+v, want the probe", adm)
	}
	if h, _ := getHealth(t, e, "p"); h.Trips != 0 || h.LastTripS != 2 {
		t.Errorf("health %+v, want the trip recorded, counting no trip", h)
	}
	// The probe of a provider tripped while healthy, with no failures to
	// reset, closes the circuit for every processor all the same.
	if err := b.RecordSuccess(e.ctx, "p"); err != nil {
		t.Fatal(err)
	}
	_ = b.ReleaseProbe(e.ctx, "p", adm.Lease)
	for name, s := range map[string]*kvstate.Store{"a": a, "b": b} {
		eventually(t, 2*time.Second, name+" to see the circuit closed", func() bool { return s.State("p", time.Now()) == kvstate.StateClosed })
	}
}

// TestASuccessInFlightAtATripLeavesItHalfOpen: the success of a call that
// was in flight when an operator tripped a healthy provider, coming while
// the operator's cooldown runs, closes nothing: when it ends the provider
// is half-open, one request first, not open to every worker at once.
func TestASuccessInFlightAtATripLeavesItHalfOpen(t *testing.T) {
	e := setup(t)
	b := e.store(t, "proc-b", nil)
	if _, err := e.operatorStore(t).Trip(e.ctx, "p", kvstate.OperatorTrip{For: 2 * time.Second, Reason: "maintenance", By: "alice@host", HalfOpen: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "b to skip the provider", func() bool { return b.State("p", time.Now()) == kvstate.StateOpen })
	_, rev := getHealth(t, e, "p")
	if err := b.RecordSuccess(e.ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, after := getHealth(t, e, "p"); after != rev {
		t.Errorf("a success during the operator's cooldown wrote the health (revision %d, was %d)", after, rev)
	}
	eventually(t, 5*time.Second, "the operator's cooldown to end", func() bool { return b.State("p", time.Now()) != kvstate.StateOpen })
	if got := b.State("p", time.Now()); got != kvstate.StateHalfOpen {
		t.Fatalf("after the operator's cooldown: %s, want half-open", got)
	}
	// Its probe's success closes the circuit, and writes once: later
	// successes have nothing to change.
	if err := b.RecordSuccess(e.ctx, "p"); err != nil {
		t.Fatal(err)
	}
	_, closedRev := getHealth(t, e, "p")
	if got := b.State("p", time.Now()); got != kvstate.StateClosed {
		t.Fatalf("after the probe's success: %s, want closed", got)
	}
	for range 3 {
		if err := b.RecordSuccess(e.ctx, "p"); err != nil {
			t.Fatal(err)
		}
	}
	if _, rev := getHealth(t, e, "p"); rev != closedRev {
		t.Errorf("a success with nothing to change wrote revision %d (was %d)", rev, closedRev)
	}
}

// TestTripLeavesALongerCooldownAndExtendsAShorterOne: a trip never shortens
// a running cooldown (the hour a 401 opened stays, and nothing is written)
// and replaces one that ends sooner.
func TestTripLeavesALongerCooldownAndExtendsAShorterOne(t *testing.T) {
	e := setup(t)
	s := e.store(t, "proc", nil)
	if err := s.RecordFailure(e.ctx, "long", authFailure()); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordFailure(e.ctx, "short", serverFailure(policy(1, time.Minute))); err != nil {
		t.Fatal(err)
	}
	before := bucketRevision(t, e)
	trip := kvstate.OperatorTrip{For: 30 * time.Minute, Reason: "maintenance", By: "alice@host", HalfOpen: true}
	out, err := e.operatorStore(t).Trip(e.ctx, "long", trip)
	if err != nil || out.Opened || out.Cooldown == nil || out.Cooldown.Class != chain.ClassAuth || time.Until(out.Until) < 50*time.Minute {
		t.Fatalf("trip over the auth cooldown: %+v, %v; want it kept", out, err)
	}
	if after := bucketRevision(t, e); after != before {
		t.Errorf("a trip shorter than the running cooldown wrote to the bucket")
	}
	out, err = e.operatorStore(t).Trip(e.ctx, "short", trip)
	if err != nil || !out.Opened {
		t.Fatalf("trip over a one-minute cooldown: %+v, %v; want it opened", out, err)
	}
	if c, _ := storedCooldown(t, e, "short"); !c.Operator || c.DurationS != 1800 {
		t.Errorf("cooldown key %+v, want the operator's 30 minutes", c)
	}
	eventually(t, 2*time.Second, "the mirror to see it", func() bool {
		until, _ := s.Cooling("short", time.Now())
		return time.Until(until) > 25*time.Minute
	})
	if h, _ := getHealth(t, e, "short"); h.Trips != 1 || h.LastTripS != 1800 {
		t.Errorf("health %+v, want the trip of one failure kept and the operator's length", h)
	}
}

// TestTripRefusesPartSeconds: KV TTLs are whole seconds, at least one.
func TestTripRefusesPartSeconds(t *testing.T) {
	e := setup(t)
	for _, d := range []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond, -time.Second} {
		if _, err := e.operatorStore(t).Trip(e.ctx, "p", kvstate.OperatorTrip{For: d, Reason: "x", By: "alice@host"}); err == nil {
			t.Errorf("trip for %s: no error", d)
		}
	}
}

// TestTripWithoutHalfOpenEndsClosed: a provider with no circuit of its
// own (failure_threshold 0) is as its health was when the operator's
// cooldown ends: closed.
func TestTripWithoutHalfOpenEndsClosed(t *testing.T) {
	e := setup(t)
	s := e.store(t, "proc", nil)
	if _, err := e.operatorStore(t).Trip(e.ctx, "p", kvstate.OperatorTrip{For: time.Second, Reason: "x", By: "alice@host"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "the mirror to see the cooldown", func() bool { return s.State("p", time.Now()) == kvstate.StateOpen })
	eventually(t, 3*time.Second, "the cooldown to end", func() bool { return s.State("p", time.Now()) != kvstate.StateOpen })
	if st := s.State("p", time.Now()); st != kvstate.StateClosed {
		t.Errorf("after the cooldown: %s, want closed", st)
	}
	if _, ok := s.Health("p"); ok {
		t.Error("a trip without HalfOpen wrote the health")
	}
}

// lockedWriter serialises writes to w, for a log read while it is written.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestAResetLearnedFromAConflictIsLogged: a processor whose failure write
// meets the reset's newer health learns of the reset there, before its
// watch brings the same revision (which it then ignores), and logs it.
func TestAResetLearnedFromAConflictIsLogged(t *testing.T) {
	e := setup(t)
	var logs bytes.Buffer
	if err := e.store(t, "proc-b", nil).RecordFailure(e.ctx, "p", authFailure()); err != nil {
		t.Fatal(err)
	}
	// Loaded, not following: only a write's conflict can show it the reset.
	a := kvstate.New(e.js, e.kv, kvstate.Options{ID: "proc-a", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := a.Load(e.ctx); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if _, err := e.operatorStore(t).Reset(e.ctx, "p", "alice@host"); err != nil {
		t.Fatal(err)
	}
	f := authFailure()
	f.Started = started
	if err := a.RecordFailure(e.ctx, "p", f); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `msg="provider reset by an operator: cooldown ended, failures and trips cleared" provider=p by=alice@host`) {
		t.Errorf("no log of the reset:\n%s", logs.String())
	}
	if st := a.State("p", time.Now()); st != kvstate.StateClosed {
		t.Errorf("state after the conflict: %s, want closed", st)
	}
}
