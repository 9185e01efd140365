package kvstate

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
)

// TestAfterReset: a reset leaves nothing of the failures and trips, only
// who reset the provider and when: after every failure and trip it clears,
// even one a clock ahead of the operator's dated later. The provider is
// closed.
func TestAfterReset(t *testing.T) {
	p := policy(1, 10*time.Second, time.Hour, time.Hour)
	tripped, _ := afterFailure(Health{}, chain.Failure{Class: chain.ClassAuth, At: t0, CooldownFor: time.Hour, Policy: p}, time.Time{})
	ahead, _ := afterFailure(Health{}, chain.Failure{Class: chain.ClassServer, At: t0.Add(2 * time.Second), Policy: p}, time.Time{})
	for _, tc := range []struct {
		name     string
		h        Health
		at, want time.Time
	}{
		{"no health", Health{}, t0.Add(time.Minute + 500*time.Microsecond), t0.Add(time.Minute + time.Millisecond)},
		{"on a millisecond", Health{}, t0.Add(time.Minute), t0.Add(time.Minute)},
		{"tripped before", tripped, t0.Add(time.Minute), t0.Add(time.Minute)},
		{"a trip dated later", ahead, t0.Add(time.Second), t0.Add(2*time.Second + time.Millisecond)},
	} {
		h := afterReset(tc.h, "alice@host", tc.at)
		if want := (Health{ResetAt: tc.want, ResetBy: "alice@host"}); h != want {
			t.Errorf("%s: afterReset = %+v, want %+v", tc.name, h, want)
		}
		if halfOpen(h) || !tripEnd(h, chain.CooldownPolicy{}).IsZero() {
			t.Errorf("%s: a reset provider is half-open or cooling: %+v", tc.name, h)
		}
		if c := (Cooldown{Until: tc.h.LastTrip.Add(time.Hour), DurationS: 3600}); !tc.h.LastTrip.IsZero() && !resetEnds(c, h) {
			t.Errorf("%s: the cooldown of the trip the reset cleared is not ended by it", tc.name)
		}
	}
	if long := afterReset(Health{}, strings.Repeat("x", 1000), t0); len(long.ResetBy) > maxBy+len("…") {
		t.Errorf("reset_by of %d bytes, want at most %d", len(long.ResetBy), maxBy)
	}
}

// TestPredatesReset: the failure of a call that began before the reset
// (or failed before it, its start unknown) belongs to the outage the reset
// ended.
func TestPredatesReset(t *testing.T) {
	reset := afterReset(Health{}, "alice@host", t0)
	for _, tc := range []struct {
		name        string
		h           Health
		started, at time.Time
		want        bool
	}{
		{"no reset", Health{}, t0.Add(-time.Minute), t0.Add(-time.Second), false},
		{"began before, failed after", reset, t0.Add(-time.Second), t0.Add(time.Second), true},
		{"began at the reset", reset, t0, t0.Add(time.Second), false},
		{"began after", reset, t0.Add(time.Millisecond), t0.Add(time.Second), false},
		{"start unknown, failed before", reset, time.Time{}, t0.Add(-time.Millisecond), true},
		{"start unknown, failed after", reset, time.Time{}, t0.Add(time.Millisecond), false},
	} {
		f := chain.Failure{Class: chain.ClassAuth, Started: tc.started, At: tc.at}
		if got := predatesReset(tc.h, f); got != tc.want {
			t.Errorf("%s: predatesReset = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestResetEnds: a reset ends the cooldowns opened before it, and no other.
func TestResetEnds(t *testing.T) {
	reset := afterReset(Health{}, "alice@host", t0)
	cooldown := func(opened time.Time, d time.Duration) Cooldown {
		return Cooldown{Until: opened.Add(d), DurationS: int64(d / time.Second)}
	}
	for _, tc := range []struct {
		name string
		h    Health
		c    Cooldown
		want bool
	}{
		{"no reset", Health{}, cooldown(t0.Add(-time.Minute), time.Hour), false},
		{"opened before", reset, cooldown(t0.Add(-time.Minute), time.Hour), true},
		{"opened a moment before, written after", reset, cooldown(t0.Add(-time.Millisecond), time.Hour), true},
		{"opened at the reset", reset, cooldown(t0, time.Hour), false},
		{"opened after", reset, cooldown(t0.Add(time.Second), 30*time.Second), false},
	} {
		if got := resetEnds(tc.c, tc.h); got != tc.want {
			t.Errorf("%s: resetEnds = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAfterOperatorTrip: an operator's trip is recorded as the last trip,
// with its length, so that the provider is cooling by its health too and
// half-open when it ends; it counts no trip toward escalation, and it
// never shortens a trip that runs longer.
func TestAfterOperatorTrip(t *testing.T) {
	p := policy(3, 10*time.Second, time.Hour, 3*time.Hour) // no trip window passes
	tripped, _ := afterFailure(Health{}, chain.Failure{Class: chain.ClassAuth, At: t0, CooldownFor: time.Hour, Policy: p}, time.Time{})
	for _, tc := range []struct {
		name      string
		h         Health
		d         time.Duration
		wantWrite bool
		wantEnd   time.Time
	}{
		{"healthy", Health{}, 30 * time.Second, true, t0.Add(time.Minute + 30*time.Second)},
		{"after a reset", afterReset(Health{}, "bob@host", t0), 30 * time.Second, true, t0.Add(time.Minute + 30*time.Second)},
		{"cooling longer", tripped, 30 * time.Second, false, t0.Add(time.Hour)},
		{"cooling shorter", tripped, 2 * time.Hour, true, t0.Add(time.Minute + 2*time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := t0.Add(time.Minute)
			h, write := afterOperatorTrip(tc.h, at, tc.d)
			if write != tc.wantWrite {
				t.Fatalf("write = %v, want %v (%+v)", write, tc.wantWrite, h)
			}
			if end := tripEnd(h, p); !end.Equal(tc.wantEnd) {
				t.Errorf("trip ends %s, want %s", end, tc.wantEnd)
			}
			if h.Trips != tc.h.Trips || h.ConsecutiveFailures != tc.h.ConsecutiveFailures || h.ResetAt != tc.h.ResetAt {
				t.Errorf("health %+v, want trips, failures and reset of %+v", h, tc.h)
			}
			if !write {
				return
			}
			if !halfOpen(h) {
				t.Errorf("after the operator's trip the provider is not half-open once it ends: %+v", h)
			}
			// The probe after it fails: the next cooldown is the first
			// step of escalation after the trips before it, not one more.
			end := h.LastTrip.Add(tc.d)
			next, d := afterFailure(h, chain.Failure{Class: chain.ClassServer, At: end.Add(time.Second), Started: end, Policy: p}, time.Time{})
			if want := escalate(p, tc.h.Trips+1); d != want || next.Trips != tc.h.Trips+1 {
				t.Errorf("the failed probe after the operator's trip opened %v (trip %d), want %v (trip %d)", d, next.Trips, want, tc.h.Trips+1)
			}
		})
	}
}

// TestAFailureInFlightAtAnOperatorTrip: a call that was in flight when the
// operator tripped the provider is counted when it fails, but opens no
// cooldown of its own.
func TestAFailureInFlightAtAnOperatorTrip(t *testing.T) {
	p := policy(1, 10*time.Second, time.Hour, time.Hour)
	h, _ := afterOperatorTrip(Health{}, t0, time.Minute)
	h, d := afterFailure(h, chain.Failure{Class: chain.ClassServer, Started: t0.Add(-time.Second), At: t0.Add(time.Second), Policy: p}, t0.Add(time.Minute))
	if d != 0 || h.ConsecutiveFailures != 1 || h.Trips != 0 {
		t.Fatalf("a failure in flight at the operator's trip: %v, %+v; want it counted and no cooldown", d, h)
	}
}

// TestTrackerOperatorActs: a watch reports an operator's trip as opened,
// marked as the operator's, its end as expired; a reset as one reset
// event naming the operator, whatever it ended, and the deletion of the
// cooldown key that follows reports nothing; a cooldown key that a trip
// racing the reset wrote after it is no event at all.
func TestTrackerOperatorActs(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(key string, v any, at time.Duration) entry {
		b, _ := json.Marshal(v)
		return entry{key: key, value: b, created: t0.Add(at), op: jetstream.KeyValuePut}
	}
	del := func(key string, at time.Duration) entry {
		return entry{key: key, created: t0.Add(at), op: jetstream.KeyValueDelete}
	}
	marker := func(at time.Duration) entry {
		return entry{key: "p.cooldown", created: t0.Add(at), op: jetstream.KeyValuePurge}
	}
	auth := put("p.health", Health{ConsecutiveFailures: 1, Trips: 1, LastTrip: t0, LastTripS: 3600}, 0)
	authCooldown := put("p.cooldown", Cooldown{Until: t0.Add(time.Hour), DurationS: 3600, Class: chain.ClassAuth, Trip: 1}, 0)
	reset := put("p.health", afterReset(Health{}, "alice@host", t0.Add(time.Minute)), time.Minute)
	operator := Cooldown{Until: t0.Add(90 * time.Second), DurationS: 30, Reason: "maintenance", By: "alice@host", Operator: true}
	tripHealth, _ := afterOperatorTrip(Health{}, t0.Add(time.Minute), 30*time.Second)
	racing := put("p.cooldown", Cooldown{Until: t0.Add(time.Hour), DurationS: 3600, Class: chain.ClassAuth, Trip: 1}, time.Minute+time.Millisecond)
	for _, tc := range []struct {
		name    string
		entries []entry
		want    []EventKind
	}{
		{"a reset of an open provider", []entry{auth, authCooldown, reset, del("p.cooldown", time.Minute)},
			[]EventKind{EventOpened, EventReset}},
		{"a reset, then a racing trip's key", []entry{auth, authCooldown, reset, del("p.cooldown", time.Minute), racing},
			[]EventKind{EventOpened, EventReset}},
		{"a reset of a healthy provider with trips", []entry{put("p.health", Health{Trips: 2, LastTrip: t0, LastSuccess: t0.Add(time.Second)}, 0), reset},
			[]EventKind{EventReset}},
		{"an operator's trip that expires", []entry{put("p.cooldown", operator, time.Minute), put("p.health", tripHealth, time.Minute), marker(90 * time.Second)},
			[]EventKind{EventOpened, EventExpired}},
		// The probe's success after an operator's trip of a healthy
		// provider closes the circuit: no failures to reset, but a trip
		// it had not succeeded since. A second trip over the half-open
		// provider closes nothing.
		{"an operator's trip, then the probe's success", []entry{put("p.cooldown", operator, time.Minute), put("p.health", tripHealth, time.Minute),
			marker(90 * time.Second), put("p.health", func() Health { h := tripHealth; h.LastSuccess = t0.Add(91 * time.Second); return h }(), 91*time.Second)},
			[]EventKind{EventOpened, EventExpired, EventClosed}},
		{"a second operator's trip over a half-open provider", []entry{put("p.cooldown", operator, time.Minute), put("p.health", tripHealth, time.Minute),
			marker(90 * time.Second), put("p.health", func() Health { h, _ := afterOperatorTrip(tripHealth, t0.Add(95*time.Second), 3*time.Second); return h }(), 95*time.Second)},
			[]EventKind{EventOpened, EventExpired}},
		{"an operator's trip, reset", []entry{put("p.cooldown", operator, time.Minute), put("p.health", tripHealth, time.Minute),
			put("p.health", afterReset(Health{}, "bob@host", t0.Add(80*time.Second)), 80*time.Second), del("p.cooldown", 80*time.Second)},
			[]EventKind{EventOpened, EventReset}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			var got []EventKind
			var evs []Event
			for i, e := range tc.entries {
				e.rev = uint64(i + 1)
				for _, ev := range tr.events(e) {
					got = append(got, ev.Kind)
					evs = append(evs, ev)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("events %v, want %v", got, tc.want)
			}
			for _, ev := range evs {
				switch {
				case ev.Kind == EventReset && (ev.By == "" || !strings.HasSuffix(ev.String(), "reset    by "+ev.By)):
					t.Errorf("reset event %+v, line %q: want it to name the operator", ev, ev.String())
				case ev.Kind == EventOpened && ev.Cooldown.Operator &&
					!strings.HasSuffix(ev.String(), "(30s, by operator alice@host): maintenance"):
					t.Errorf("operator's opened line %q", ev.String())
				}
			}
			// Nothing the entries leave keeps the provider open: the
			// reset ended the cooldowns before it, the operator's ended.
			if rows := tr.states(t0.Add(100*time.Second), nil); len(rows) != 1 || rows[0].State.State == StateOpen {
				t.Errorf("state after the entries: %+v", rows)
			}
		})
	}
}
