package kvstate

import (
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func policy(threshold int, cooldown, maxCooldown, window time.Duration) chain.CooldownPolicy {
	return chain.CooldownPolicy{
		FailureThreshold: threshold,
		Cooldown:         cooldown,
		MaxCooldown:      maxCooldown,
		TripWindow:       window,
		AuthCooldown:     time.Hour,
	}
}

func failureAt(p chain.CooldownPolicy, at time.Time) chain.Failure {
	return chain.Failure{Class: chain.ClassServer, Error: "503 Service Unavailable", At: at, Policy: p}
}

func TestAfterFailureThreshold(t *testing.T) {
	p := policy(3, 10*time.Second, 40*time.Second, time.Hour)
	var h Health
	for i := 1; i <= 3; i++ {
		var d time.Duration
		h, d = afterFailure(h, failureAt(p, t0.Add(time.Duration(i)*time.Millisecond)), time.Time{})
		if h.ConsecutiveFailures != i {
			t.Fatalf("failure %d: consecutive_failures = %d", i, h.ConsecutiveFailures)
		}
		if i < 3 {
			if d != 0 || h.Trips != 0 || !h.LastTrip.IsZero() {
				t.Fatalf("failure %d below threshold opened %v (trips %d)", i, d, h.Trips)
			}
			continue
		}
		if d != 10*time.Second {
			t.Fatalf("failure %d: cooldown = %v, want 10s", i, d)
		}
		if h.Trips != 1 || !h.LastTrip.Equal(t0.Add(3*time.Millisecond)) {
			t.Fatalf("failure %d: trips %d last_trip %v", i, h.Trips, h.LastTrip)
		}
	}
	if h.LastClass != chain.ClassServer || h.LastError != "503 Service Unavailable" || !h.LastFailure.Equal(t0.Add(3*time.Millisecond)) {
		t.Errorf("last failure not recorded: %+v", h)
	}
}

func TestAfterFailureThresholdZeroNeverOpens(t *testing.T) {
	p := policy(0, 10*time.Second, time.Minute, time.Hour)
	var h Health
	for i := range 50 {
		f := failureAt(p, t0.Add(time.Duration(i)*time.Minute))
		if i%2 == 1 {
			f.Class, f.CooldownFor = chain.ClassAuth, time.Hour
		}
		var d time.Duration
		h, d = afterFailure(h, f, time.Time{})
		if d != 0 {
			t.Fatalf("failure %d opened %v with threshold 0", i, d)
		}
	}
	if h.ConsecutiveFailures != 50 || h.Trips != 0 {
		t.Errorf("health = %+v, want 50 failures and no trips", h)
	}
}

func TestAfterFailureCooldownFor(t *testing.T) {
	tests := []struct {
		for_ time.Duration
		want time.Duration
	}{
		{time.Hour, time.Hour},
		{90 * time.Second, 90 * time.Second},
		{1200 * time.Millisecond, 2 * time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{300 * time.Millisecond, time.Second},
		{time.Nanosecond, time.Second},
	}
	p := policy(5, 10*time.Minute, time.Hour, time.Hour)
	for _, tt := range tests {
		f := failureAt(p, t0)
		f.Class, f.CooldownFor = chain.ClassRateLimit, tt.for_
		h, d := afterFailure(Health{}, f, time.Time{})
		if d != tt.want {
			t.Errorf("CooldownFor %v: cooldown = %v, want %v", tt.for_, d, tt.want)
		}
		if h.ConsecutiveFailures != 1 || h.Trips != 1 || !h.LastTrip.Equal(t0) {
			t.Errorf("CooldownFor %v: health = %+v, want the first failure to trip", tt.for_, h)
		}
	}
}

func TestAfterFailureEscalation(t *testing.T) {
	p := policy(1, time.Second, 4*time.Second, time.Hour)
	var h Health
	at := t0
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second} {
		var d time.Duration
		h, d = afterFailure(h, failureAt(p, at), time.Time{})
		if d != want {
			t.Fatalf("trip %d: cooldown = %v, want %v", i+1, d, want)
		}
		if h.Trips != i+1 || h.LastTripS != int64(want/time.Second) {
			t.Fatalf("trip %d: trips = %d, last_trip_s = %d", i+1, h.Trips, h.LastTripS)
		}
		at = at.Add(d) // the next failure comes as the cooldown ends
	}
}

func TestAfterFailureEscalationNeedsThreshold(t *testing.T) {
	// After a cooldown ends, the next trip still needs consecutive failures
	// at the threshold; without a success in between the count is already
	// there, so the first failure after the cooldown trips again.
	p := policy(3, time.Second, 8*time.Second, time.Hour)
	h := Health{ConsecutiveFailures: 2}
	h, d := afterFailure(h, failureAt(p, t0), time.Time{})
	if d != time.Second {
		t.Fatalf("first trip = %v, want 1s", d)
	}
	// A success reset the count and closed the circuit; trips are kept.
	h.ConsecutiveFailures, h.LastSuccess = 0, t0.Add(1500*time.Millisecond)
	for i := range 2 {
		if h, d = afterFailure(h, failureAt(p, t0.Add(2*time.Second+time.Duration(i)*time.Millisecond)), time.Time{}); d != 0 {
			t.Fatalf("failure %d after a success opened %v", i+1, d)
		}
	}
	if h, d = afterFailure(h, failureAt(p, t0.Add(3*time.Second)), time.Time{}); d != 2*time.Second || h.Trips != 2 {
		t.Fatalf("third failure: cooldown %v trips %d, want 2s and 2", d, h.Trips)
	}
}

func TestAfterFailureTripDecay(t *testing.T) {
	p := policy(1, time.Second, time.Minute, 10*time.Second)
	var h Health
	at := t0
	var d time.Duration
	for range 3 {
		h, d = afterFailure(h, failureAt(p, at), time.Time{})
		at = at.Add(d)
	}
	if h.Trips != 3 || d != 4*time.Second {
		t.Fatalf("after 3 trips: trips %d last cooldown %v", h.Trips, d)
	}
	last := h.LastTrip

	// Within the window (counted from the last trip) escalation continues.
	h2, d := afterFailure(h, failureAt(p, last.Add(10*time.Second)), time.Time{})
	if h2.Trips != 4 || d != 8*time.Second {
		t.Errorf("failure at the window's end: trips %d cooldown %v, want 4 and 8s", h2.Trips, d)
	}
	// After a quiet window the trips start again from one.
	h3, d := afterFailure(h, failureAt(p, last.Add(10*time.Second+time.Millisecond)), time.Time{})
	if h3.Trips != 1 || d != time.Second {
		t.Errorf("failure after the window: trips %d cooldown %v, want 1 and 1s", h3.Trips, d)
	}
}

func TestAfterFailureWhileTripRunning(t *testing.T) {
	p := policy(1, 10*time.Second, time.Minute, time.Hour)
	tripped, d := afterFailure(Health{}, failureAt(p, t0), time.Time{})
	if d != 10*time.Second || tripped.Trips != 1 {
		t.Fatalf("first trip: %v trips %d", d, tripped.Trips)
	}
	tests := []struct {
		name    string
		h       Health
		at      time.Time
		running time.Time // the end of the cooldown the mirror shows
		forced  time.Duration
	}{
		{name: "per health, just after", h: tripped, at: t0.Add(time.Millisecond)},
		{name: "per health, last instant", h: tripped, at: t0.Add(10*time.Second - time.Millisecond)},
		{name: "per health, a shorter forced cooldown", h: tripped, at: t0.Add(time.Second), forced: 5 * time.Second},
		{name: "per health, a forced cooldown ending with it", h: tripped, at: t0.Add(time.Second), forced: 9 * time.Second},
		{name: "mirror cooling, health shows nothing", h: Health{ConsecutiveFailures: 5}, at: t0, running: t0.Add(time.Second)},
		{name: "mirror cooling after the health's trip ended", h: tripped, at: t0.Add(time.Minute), running: t0.Add(2 * time.Minute)},
		{name: "mirror cooling longer than a forced cooldown", h: Health{}, at: t0, running: t0.Add(2 * time.Hour), forced: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := failureAt(p, tt.at)
			if tt.forced > 0 {
				f.Class, f.CooldownFor = chain.ClassAuth, tt.forced
			}
			h, d := afterFailure(tt.h, f, tt.running)
			if d != 0 {
				t.Errorf("opened %v while a longer trip is running", d)
			}
			if h.Trips != tt.h.Trips || !h.LastTrip.Equal(tt.h.LastTrip) || h.LastTripS != tt.h.LastTripS {
				t.Errorf("trips %d last_trip %v, want unchanged %d %v", h.Trips, h.LastTrip, tt.h.Trips, tt.h.LastTrip)
			}
			if h.ConsecutiveFailures != tt.h.ConsecutiveFailures+1 {
				t.Errorf("consecutive_failures = %d, want %d (still counted)", h.ConsecutiveFailures, tt.h.ConsecutiveFailures+1)
			}
		})
	}
	// Once the trip's cooldown has ended, the next failure trips again.
	if h, d := afterFailure(tripped, failureAt(p, t0.Add(10*time.Second)), time.Time{}); d != 20*time.Second || h.Trips != 2 {
		t.Errorf("failure as the cooldown ends: %v trips %d, want 20s and 2", d, h.Trips)
	}
}

// TestAfterFailureForcedCooldownExtends: a failure that asks for a cooldown
// ending later than the running one (a 401 arriving during a 20 s
// Retry-After cooldown) is a new trip of its own length; the stronger
// cooldown is never lost to the weaker one.
func TestAfterFailureForcedCooldownExtends(t *testing.T) {
	p := policy(3, 10*time.Minute, time.Hour, time.Hour)
	f := failureAt(p, t0)
	f.Class, f.CooldownFor = chain.ClassRateLimit, 20*time.Second
	h, d := afterFailure(Health{}, f, time.Time{})
	if d != 20*time.Second || h.Trips != 1 {
		t.Fatalf("Retry-After trip: %v trips %d, want 20s and 1", d, h.Trips)
	}
	for _, running := range []time.Time{{}, t0.Add(20 * time.Second)} { // per health alone, and with the key mirrored
		auth := failureAt(p, t0.Add(2*time.Second))
		auth.Class, auth.CooldownFor = chain.ClassAuth, time.Hour
		h2, d := afterFailure(h, auth, running)
		if d != time.Hour {
			t.Fatalf("auth failure during a 20s cooldown (mirror until %v) opened %v, want 1h", running, d)
		}
		if h2.Trips != 2 || !h2.LastTrip.Equal(t0.Add(2*time.Second)) || h2.LastTripS != 3600 || h2.LastClass != chain.ClassAuth {
			t.Errorf("health after the extension: %+v", h2)
		}
		if !tripRunning(h2, p, t0.Add(59*time.Minute)) {
			t.Error("the health value does not say the 1h trip is running")
		}
	}
}

// TestAfterFailureAfterShortCooldownFor: a cooldown opened for a Retry-After
// shorter than the policy's cooldown runs for that Retry-After only; once it
// has ended, failures must be able to open the next cooldown.
func TestAfterFailureAfterShortCooldownFor(t *testing.T) {
	p := policy(1, 10*time.Minute, time.Hour, time.Hour)
	f := failureAt(p, t0)
	f.Class, f.CooldownFor = chain.ClassRateLimit, 30*time.Second
	h, d := afterFailure(Health{}, f, time.Time{})
	if d != 30*time.Second {
		t.Fatalf("Retry-After trip = %v, want 30s", d)
	}
	// Still running 29s later.
	if _, d := afterFailure(h, failureAt(p, t0.Add(29*time.Second)), time.Time{}); d != 0 {
		t.Errorf("failure within the 30s cooldown opened %v", d)
	}
	// Ended after 30s: the probe's failure opens the next, longer cooldown.
	h2, d := afterFailure(h, failureAt(p, t0.Add(31*time.Second)), time.Time{})
	if d != 20*time.Minute || h2.Trips != 2 {
		t.Errorf("failure after the 30s cooldown ended: %v trips %d, want 20m and 2", d, h2.Trips)
	}
	// The same holds for an auth cooldown shorter than the escalated one.
	p.AuthCooldown = time.Minute
	f = failureAt(p, t0)
	f.Class, f.CooldownFor = chain.ClassAuth, p.AuthCooldown
	h, _ = afterFailure(Health{}, f, time.Time{})
	f.At = t0.Add(2 * time.Minute)
	if _, d := afterFailure(h, f, time.Time{}); d != time.Minute {
		t.Errorf("auth failure after the 1m auth cooldown ended opened %v, want 1m", d)
	}
}

// TestAfterFailureAtTheThresholdKeepsItsOwnCooldown: a failure that asks
// for a cooldown of its own (a wait hint, auth) opens exactly that one
// (docs/failures.md, Cooldowns: "opens exactly that cooldown"), also when it is the
// failure that reaches the threshold: a provider that keeps answering
// Retry-After: 30 is asked again every 30 s, as it says.
func TestAfterFailureAtTheThresholdKeepsItsOwnCooldown(t *testing.T) {
	p := policy(3, 10*time.Minute, time.Hour, 24*time.Hour)
	p.AuthCooldown = time.Minute
	for _, tt := range []struct {
		class chain.Class
		for_  time.Duration
	}{
		{chain.ClassRateLimit, 30 * time.Second},
		{chain.ClassServer, 11 * time.Second},
		{chain.ClassAuth, time.Minute},
	} {
		f := failureAt(p, t0)
		f.Class, f.CooldownFor = tt.class, tt.for_
		h, d := afterFailure(Health{ConsecutiveFailures: 2, Trips: 2, LastTrip: t0.Add(-time.Hour), LastTripS: 30}, f, time.Time{})
		if d != tt.for_ || h.Trips != 3 {
			t.Errorf("%s asking for %v at the threshold: cooldown %v, trips %d; want %v, 3", tt.class, tt.for_, d, h.Trips, tt.for_)
		}
	}
}

func TestAfterFailureStoresUTCMillis(t *testing.T) {
	p := policy(1, time.Second, time.Second, time.Hour)
	zone := time.FixedZone("X", 5*3600)
	at := time.Date(2030, 1, 2, 8, 4, 5, 123456789, zone)
	h, _ := afterFailure(Health{}, failureAt(p, at), time.Time{})
	want := time.Date(2030, 1, 2, 3, 4, 5, 123000000, time.UTC)
	if !h.LastFailure.Equal(want) || h.LastFailure.Location() != time.UTC || !h.LastTrip.Equal(want) {
		t.Errorf("last_failure %v last_trip %v, want %v in UTC", h.LastFailure, h.LastTrip, want)
	}
	f := failureAt(p, at)
	f.Error = strings.Repeat("e", 1000)
	h, _ = afterFailure(Health{}, f, time.Time{})
	if len(h.LastError) > 310 || !strings.HasSuffix(h.LastError, "…") {
		t.Errorf("last_error not truncated: %d bytes", len(h.LastError))
	}
}

func TestEscalate(t *testing.T) {
	tests := []struct {
		cooldown, max time.Duration
		trips         int
		want          time.Duration
	}{
		{time.Second, 4 * time.Second, 0, time.Second},
		{time.Second, 4 * time.Second, 1, time.Second},
		{time.Second, 4 * time.Second, 2, 2 * time.Second},
		{time.Second, 4 * time.Second, 3, 4 * time.Second},
		{time.Second, 4 * time.Second, 4, 4 * time.Second},
		{time.Second, 4 * time.Second, 1000, 4 * time.Second},
		{10 * time.Minute, time.Hour, 3, 40 * time.Minute},
		{10 * time.Minute, time.Hour, 4, time.Hour},
		{3 * time.Second, 10 * time.Second, 3, 10 * time.Second},
		{10 * time.Minute, 5 * time.Minute, 1, 5 * time.Minute},
		{time.Second, 0, 4, 8 * time.Second},
	}
	for _, tt := range tests {
		p := policy(1, tt.cooldown, tt.max, time.Hour)
		if got := escalate(p, tt.trips); got != tt.want {
			t.Errorf("escalate(cooldown %v, max %v, trips %d) = %v, want %v", tt.cooldown, tt.max, tt.trips, got, tt.want)
		}
	}
}

func TestWholeSeconds(t *testing.T) {
	tests := []struct{ in, want time.Duration }{
		{-5 * time.Second, time.Second},
		{0, time.Second},
		{time.Nanosecond, time.Second},
		{999 * time.Millisecond, time.Second},
		{time.Second, time.Second},
		{time.Second + time.Nanosecond, 2 * time.Second},
		{1400 * time.Millisecond, 2 * time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{1999 * time.Millisecond, 2 * time.Second},
		{10 * time.Minute, 10 * time.Minute},
		{time.Hour + time.Millisecond, time.Hour + time.Second},
	}
	for _, tt := range tests {
		if got := wholeSeconds(tt.in); got != tt.want {
			t.Errorf("wholeSeconds(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestTripRunning(t *testing.T) {
	p := policy(3, time.Second, 4*time.Second, time.Hour)
	tests := []struct {
		name string
		h    Health
		at   time.Time
		want bool
	}{
		{name: "never tripped", h: Health{ConsecutiveFailures: 10}, at: t0, want: false},
		{name: "no trips counted", h: Health{LastTrip: t0}, at: t0, want: false},
		{name: "first trip running", h: Health{Trips: 1, LastTrip: t0}, at: t0.Add(999 * time.Millisecond), want: true},
		{name: "first trip ended", h: Health{Trips: 1, LastTrip: t0}, at: t0.Add(time.Second), want: false},
		{name: "third trip running", h: Health{Trips: 3, LastTrip: t0}, at: t0.Add(3 * time.Second), want: true},
		{name: "third trip ended", h: Health{Trips: 3, LastTrip: t0}, at: t0.Add(4 * time.Second), want: false},
		{name: "capped trip ended", h: Health{Trips: 9, LastTrip: t0}, at: t0.Add(4 * time.Second), want: false},
		{name: "before the trip", h: Health{Trips: 1, LastTrip: t0}, at: t0.Add(-time.Second), want: true},
		{name: "recorded length longer than escalated", h: Health{Trips: 1, LastTrip: t0, LastTripS: 3600}, at: t0.Add(59 * time.Minute), want: true},
		{name: "recorded length shorter than escalated", h: Health{Trips: 3, LastTrip: t0, LastTripS: 1}, at: t0.Add(time.Second), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tripRunning(tt.h, p, tt.at); got != tt.want {
				t.Errorf("tripRunning = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAfterFailureInHalfOpenTrips: a provider tripped by a failure that
// asked for a cooldown of its own (a wait hint, auth) is below its
// threshold when that cooldown ends. Its probe's failure must still open
// the next, longer cooldown (docs/failures.md, Cooldowns: "a counted failure
// opens the next, longer cooldown"); counting up to the threshold again would let one probe after
// another reach a provider known to be down.
func TestAfterFailureInHalfOpenTrips(t *testing.T) {
	p := policy(5, 5*time.Second, time.Hour, time.Hour)
	p.AuthCooldown = 4 * time.Second
	for _, tt := range []struct {
		class chain.Class
		for_  time.Duration
	}{
		{chain.ClassRateLimit, 3 * time.Second},
		{chain.ClassAuth, p.AuthCooldown},
	} {
		f := failureAt(p, t0)
		f.Class, f.CooldownFor = tt.class, tt.for_
		h, d := afterFailure(Health{}, f, time.Time{})
		if d != tt.for_ || h.ConsecutiveFailures != 1 {
			t.Fatalf("%s trip: %v with %d failures, want %v with 1", tt.class, d, h.ConsecutiveFailures, tt.for_)
		}
		probe := failureAt(p, t0.Add(tt.for_+time.Second))
		h2, d := afterFailure(h, probe, time.Time{})
		if d != 10*time.Second || h2.Trips != 2 {
			t.Errorf("probe failing after the %s cooldown: cooldown %v, trips %d; want 10s, 2", tt.class, d, h2.Trips)
		}
	}
	// A success since the trip closed the circuit: failures count up to the
	// threshold again.
	f := failureAt(p, t0)
	f.Class, f.CooldownFor = chain.ClassAuth, p.AuthCooldown
	h, _ := afterFailure(Health{}, f, time.Time{})
	h.ConsecutiveFailures, h.LastSuccess = 0, t0.Add(5*time.Second)
	if _, d := afterFailure(h, failureAt(p, t0.Add(6*time.Second)), time.Time{}); d != 0 {
		t.Errorf("first failure after a success opened %v", d)
	}
}

// TestAfterFailureOfACallInFlightAtTheTripEscalatesNothing: a call that
// began before the last trip was in flight when its cooldown opened. Its
// failure, landing after that cooldown ended, is counted but opens no
// escalated trip (failures.md), whether the trip came from a wait hint
// (the count below the threshold) or from the threshold; the probe's own
// failure, begun after the trip, does.
func TestAfterFailureOfACallInFlightAtTheTripEscalatesNothing(t *testing.T) {
	for _, tt := range []struct {
		name string
		p    chain.CooldownPolicy
		hint time.Duration
	}{
		{"a wait hint's trip", policy(5, 10*time.Minute, time.Hour, time.Hour), 15 * time.Second},
		{"a threshold trip", policy(1, 15*time.Second, time.Hour, time.Hour), 0},
	} {
		f := failureAt(tt.p, t0)
		f.Started = t0.Add(-time.Second)
		if tt.hint > 0 {
			f.Class, f.CooldownFor = chain.ClassRateLimit, tt.hint
		}
		h, d := afterFailure(Health{}, f, time.Time{})
		if d != 15*time.Second {
			t.Fatalf("%s: first trip %v, want 15s", tt.name, d)
		}
		stale := failureAt(tt.p, t0.Add(20*time.Second))
		stale.Class, stale.Started = chain.ClassTimeout, t0.Add(-time.Second)
		h2, d := afterFailure(h, stale, time.Time{})
		if d != 0 || h2.Trips != 1 || h2.ConsecutiveFailures != h.ConsecutiveFailures+1 {
			t.Errorf("%s: a call begun before the trip failing after its cooldown: cooldown %v, trips %d, failures %d; want none, 1, %d",
				tt.name, d, h2.Trips, h2.ConsecutiveFailures, h.ConsecutiveFailures+1)
		}
		probe := failureAt(tt.p, t0.Add(22*time.Second))
		probe.Started = t0.Add(21 * time.Second)
		if _, d := afterFailure(h2, probe, time.Time{}); d == 0 {
			t.Errorf("%s: the probe's failure opened no cooldown", tt.name)
		}
	}
}
