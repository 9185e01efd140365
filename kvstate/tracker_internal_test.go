package kvstate

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// entry is a bucket entry as a watcher delivers it.
type entry struct {
	key     string
	value   []byte
	rev     uint64
	created time.Time
	op      jetstream.KeyValueOp
}

func (e entry) Bucket() string                  { return Bucket }
func (e entry) Key() string                     { return e.key }
func (e entry) Value() []byte                   { return e.value }
func (e entry) Revision() uint64                { return e.rev }
func (e entry) Created() time.Time              { return e.created }
func (e entry) Delta() uint64                   { return 0 }
func (e entry) Operation() jetstream.KeyValueOp { return e.op }

// TestTrackerOrdersARecovery: whether the server's expiry marker comes
// before or after the probe, one recovery reads opened, expired, probe,
// closed, the expiry timed at the cooldown's until, and reported once.
func TestTrackerOrdersARecovery(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	until := t0.Add(2 * time.Second)
	put := func(key string, v any, at time.Duration) entry {
		b, _ := json.Marshal(v)
		return entry{key: key, value: b, created: t0.Add(at), op: jetstream.KeyValuePut}
	}
	tripped := Health{ConsecutiveFailures: 1, Trips: 1, LastTrip: t0, LastTripS: 2}
	opened := put("p.cooldown", Cooldown{Until: until, DurationS: 2}, 0)
	probe := put("p.probe", Probe{Until: until.Add(time.Second), By: "x"}, 2100*time.Millisecond)
	closed := put("p.health", Health{Trips: 1, LastTrip: t0, LastSuccess: t0.Add(2200 * time.Millisecond)}, 2200*time.Millisecond)
	marker := entry{key: "p.cooldown", created: t0.Add(2500 * time.Millisecond), op: jetstream.KeyValueDelete}
	early := marker
	early.created = t0.Add(2050 * time.Millisecond)
	for _, tc := range []struct {
		name    string
		entries []entry
	}{
		{"marker before the probe", []entry{put("p.health", tripped, 0), opened, early, probe, closed}},
		{"marker after the probe", []entry{put("p.health", tripped, 0), opened, probe, marker, closed}},
		{"marker after the success", []entry{put("p.health", tripped, 0), opened, probe, closed, marker}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			var kinds []EventKind
			var times []time.Time
			for i, e := range tc.entries {
				e.rev = uint64(i + 1)
				for _, ev := range tr.events(e) {
					kinds = append(kinds, ev.Kind)
					times = append(times, ev.Time)
				}
			}
			want := []EventKind{EventOpened, EventExpired, EventProbe, EventClosed}
			if !slices.Equal(kinds, want) {
				t.Fatalf("events %v, want %v", kinds, want)
			}
			if !times[1].Equal(until) {
				t.Errorf("expired at %s, want the cooldown's until %s", times[1], until)
			}
			if !slices.IsSortedFunc(times, func(a, b time.Time) int { return a.Compare(b) }) {
				t.Errorf("event times out of order: %v", times)
			}
		})
	}
}

// TestTrackerStates reports each provider's state from the values read.
func TestTrackerStates(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	tr := newTracker()
	tr.health["open"] = Health{ConsecutiveFailures: 3, Trips: 1, LastTrip: now.Add(-time.Second), LastTripS: 60}
	tr.cooling["open"] = Cooldown{Until: now.Add(59 * time.Second)}
	tr.health["half"] = Health{Trips: 1, LastTrip: now.Add(-time.Minute), LastTripS: 30}
	got := map[string]CircuitState{}
	for _, ev := range tr.states(now, []string{"quiet"}) {
		if ev.Kind != EventState || ev.State == nil {
			t.Fatalf("event %+v", ev)
		}
		got[ev.Provider] = ev.State.State
		if ev.Provider == "open" && !ev.State.CooldownUntil.Equal(now.Add(59*time.Second)) {
			t.Errorf("open until %s", ev.State.CooldownUntil)
		}
	}
	want := map[string]CircuitState{"open": StateOpen, "half": StateHalfOpen, "quiet": StateClosed}
	for p, s := range want {
		if got[p] != s {
			t.Errorf("%s: %s, want %s", p, got[p], s)
		}
	}
}

// TestTrackerCooldownDeletedByHand: deleting only a cooldown key does not
// end the cooldown (the trip in .health keeps every processor skipping the
// provider), so it is no expired event; its end is reported when a probe
// shows it over, timed at its until. Deleting the health too ends the
// outage by hand: expired and closed, then; deleting the health of a
// half-open provider closes its circuit, in either order. A cooldown key
// deleted when no trip runs in .health did end, and the server's expiry
// marker is no deletion by hand, even a little early.
func TestTrackerCooldownDeletedByHand(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	until := t0.Add(5 * time.Second)
	put := func(key string, v any, at time.Duration) entry {
		b, _ := json.Marshal(v)
		return entry{key: key, value: b, created: t0.Add(at), op: jetstream.KeyValuePut}
	}
	del := func(key string, at time.Duration) entry {
		return entry{key: key, created: t0.Add(at), op: jetstream.KeyValueDelete}
	}
	// The server's marker of an expired key, by a clock a little behind
	// the processors' when early.
	marker := func(at time.Duration) entry {
		return entry{key: "p.cooldown", created: t0.Add(at), op: jetstream.KeyValuePurge}
	}
	tripped := put("p.health", Health{ConsecutiveFailures: 1, Trips: 1, LastTrip: t0, LastTripS: 5}, 0)
	opened := put("p.cooldown", Cooldown{Until: until, DurationS: 5}, 0)
	type event struct {
		kind EventKind
		at   time.Time
	}
	for _, tc := range []struct {
		name    string
		entries []entry
		want    []event
	}{
		{"cooldown key alone", []entry{tripped, opened, del("p.cooldown", time.Second), put("p.probe", Probe{Until: t0.Add(9 * time.Second)}, 6*time.Second)},
			[]event{{EventOpened, t0}, {EventExpired, until}, {EventProbe, t0.Add(6 * time.Second)}}},
		{"both keys", []entry{tripped, opened, del("p.cooldown", time.Second), del("p.health", 2*time.Second)},
			[]event{{EventOpened, t0}, {EventExpired, t0.Add(2 * time.Second)}, {EventClosed, t0.Add(2 * time.Second)}}},
		{"health of a half-open provider", []entry{tripped, opened, del("p.cooldown", 6*time.Second), del("p.health", 7*time.Second)},
			[]event{{EventOpened, t0}, {EventExpired, until}, {EventClosed, t0.Add(7 * time.Second)}}},
		{"health while the cooldown key runs", []entry{tripped, opened, del("p.health", time.Second)},
			[]event{{EventOpened, t0}}},
		{"health first, then the cooldown key", []entry{tripped, opened, del("p.health", time.Second), del("p.cooldown", 2*time.Second)},
			[]event{{EventOpened, t0}, {EventExpired, t0.Add(2 * time.Second)}, {EventClosed, t0.Add(2 * time.Second)}}},
		{"health, then the cooldown's expiry", []entry{tripped, opened, del("p.health", time.Second), marker(5500 * time.Millisecond)},
			[]event{{EventOpened, t0}, {EventExpired, until}, {EventClosed, until}}},
		{"an expiry marker a little early", []entry{tripped, opened, marker(4900 * time.Millisecond)},
			[]event{{EventOpened, t0}, {EventExpired, t0.Add(4900 * time.Millisecond)}}},
		{"no trip in the health", []entry{put("p.health", Health{ConsecutiveFailures: 1}, 0), opened, del("p.cooldown", time.Second)},
			[]event{{EventOpened, t0}, {EventExpired, t0.Add(time.Second)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			var got []event
			for i, e := range tc.entries {
				e.rev = uint64(i + 1)
				for _, ev := range tr.events(e) {
					got = append(got, event{ev.Kind, ev.Time})
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("events %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTrackerAfterAGap: a watch that resumes after a server restart reads
// only each key's latest entry. A new cooldown that opened after the last
// one ended shows that one over: expired, at its until, before opened. One
// that replaced a cooldown still running (a longer trip) is opened alone.
// A bucket created anew ended every outage of the old one.
func TestTrackerAfterAGap(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(key string, v any, at time.Duration) entry {
		b, _ := json.Marshal(v)
		return entry{key: key, value: b, created: t0.Add(at), op: jetstream.KeyValuePut}
	}
	type event struct {
		kind     EventKind
		provider string
		at       time.Time
	}
	collect := func(tr *tracker, entries ...entry) []event {
		var got []event
		for i, e := range entries {
			e.rev = uint64(i + 1)
			for _, ev := range tr.events(e) {
				got = append(got, event{ev.Kind, ev.Provider, ev.Time})
			}
		}
		return got
	}
	first := put("p.cooldown", Cooldown{Until: t0.Add(5 * time.Second), DurationS: 5, Trip: 1}, 0)
	later := put("p.cooldown", Cooldown{Until: t0.Add(30 * time.Second), DurationS: 20, Trip: 2}, 10*time.Second)
	if got, want := collect(newTracker(), first, later), []event{
		{EventOpened, "p", t0}, {EventExpired, "p", t0.Add(5 * time.Second)}, {EventOpened, "p", t0.Add(10 * time.Second)},
	}; !slices.Equal(got, want) {
		t.Errorf("a cooldown after one that ended: events %v, want %v", got, want)
	}
	longer := put("p.cooldown", Cooldown{Until: t0.Add(60 * time.Second), DurationS: 58, Trip: 2}, 2*time.Second)
	if got, want := collect(newTracker(), first, longer), []event{
		{EventOpened, "p", t0}, {EventOpened, "p", t0.Add(2 * time.Second)},
	}; !slices.Equal(got, want) {
		t.Errorf("a cooldown replacing a running one: events %v, want %v", got, want)
	}

	tr := newTracker()
	collect(tr,
		put("a.health", Health{ConsecutiveFailures: 1, Trips: 1, LastTrip: t0, LastTripS: 60}, 0),
		put("a.cooldown", Cooldown{Until: t0.Add(time.Minute), DurationS: 60}, 0),
		put("b.health", Health{ConsecutiveFailures: 1, Trips: 1, LastTrip: t0, LastTripS: 1}, 0), // half-open
		put("c.health", Health{ConsecutiveFailures: 1}, 0),                                       // failing, never tripped
	)
	gone := t0.Add(10 * time.Second)
	var got []event
	for _, ev := range tr.bucketGone(gone) {
		got = append(got, event{ev.Kind, ev.Provider, ev.Time})
	}
	if want := []event{{EventExpired, "a", gone}, {EventClosed, "a", gone}, {EventClosed, "b", gone}}; !slices.Equal(got, want) {
		t.Errorf("bucket gone: events %v, want %v", got, want)
	}
}
