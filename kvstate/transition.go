package kvstate

import (
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/text"
)

// afterFailure is the pure health transition for one counted failure. It
// returns the new health and, when this failure trips the provider, the
// cooldown to open (zero otherwise). running is the end of the cooldown the
// mirror shows (zero when none); the trip recorded in h itself counts too.
//
// Once a cooldown has ended, the provider is half-open until it succeeds:
// a failure then opens the next cooldown, whatever the count. A trip that a
// wait hint or an auth failure opened leaves the count below the
// threshold, and counting up to it again would let one probe after another
// reach a provider known to be down.
//
// Failures of calls that were already in flight when the last trip opened
// (f.Started before it), while its cooldown runs or after it ended, are
// counted but open no escalated trip: they would only lengthen the next
// cooldown for an outage already known. A failure that asks for a cooldown
// of its own (auth, a long wait hint) and would end later than the running
// one is a new trip that extends it; one that would end sooner is ignored,
// so a running cooldown is never shortened.
func afterFailure(h Health, f chain.Failure, running time.Time) (Health, time.Duration) {
	at := utc(f.At)
	h.ConsecutiveFailures++
	h.LastClass, h.LastError, h.LastFailure = f.Class, truncate(f.Error), at
	p := f.Policy
	if p.FailureThreshold <= 0 {
		return h, 0
	}
	if end := tripEnd(h, p); end.After(running) {
		running = end
	}
	inFlight := !f.Started.IsZero() && f.Started.Before(h.LastTrip)
	if running.After(at) || inFlight {
		if f.CooldownFor <= 0 || !at.Add(wholeSeconds(f.CooldownFor)).After(running) {
			return h, 0
		}
	} else if h.ConsecutiveFailures < p.FailureThreshold && f.CooldownFor <= 0 && !halfOpen(h) {
		return h, 0
	}
	if !h.LastTrip.IsZero() && p.TripWindow > 0 && at.Sub(h.LastTrip) > p.TripWindow {
		h.Trips = 0 // a quiet trip window forgives earlier trips
	}
	h.Trips++
	h.LastTrip = at
	d := f.CooldownFor
	if d <= 0 {
		d = escalate(p, h.Trips)
	}
	d = wholeSeconds(d)
	h.LastTripS = int64(d / time.Second)
	return h, d
}

// tripEnd returns when the cooldown of the last trip recorded in h ends, or
// the zero time if h records none. It is read from the health value itself,
// so concurrent writers serialised by compare-and-set agree on it even before
// the cooldown key reaches their mirrors, and a processor that never sees the
// key still knows the provider is cooling. An operator's trip is recorded
// with its length but counts no trip (afterOperatorTrip): it is one all the
// same.
func tripEnd(h Health, p chain.CooldownPolicy) time.Time {
	if h.LastTrip.IsZero() || h.Trips == 0 && h.LastTripS <= 0 {
		return time.Time{}
	}
	d := time.Duration(h.LastTripS) * time.Second
	if d <= 0 { // a value written before last_trip_s was stored
		if p.Cooldown <= 0 {
			return time.Time{}
		}
		d = wholeSeconds(escalate(p, h.Trips))
	}
	return h.LastTrip.Add(d)
}

// tripRunning reports whether the cooldown of the last trip recorded in h is
// still running at at.
func tripRunning(h Health, p chain.CooldownPolicy, at time.Time) bool {
	return at.Before(tripEnd(h, p))
}

// escalate returns cooldown × 2^(trips−1), capped at max_cooldown.
func escalate(p chain.CooldownPolicy, trips int) time.Duration {
	d := p.Cooldown
	for i := 1; i < trips; i++ {
		d *= 2
		if p.MaxCooldown > 0 && d >= p.MaxCooldown {
			return p.MaxCooldown
		}
	}
	if p.MaxCooldown > 0 && d > p.MaxCooldown {
		return p.MaxCooldown
	}
	return d
}

// afterReset is the health that an operator's reset (processor reset) at
// at, by by, leaves in place of h: none of the provider's failures and
// trips, only the reset itself, which ends every cooldown opened before it
// (resetEnds) and discounts the failures of calls already in flight
// (predatesReset). The provider is closed. The reset is timed after every
// failure and trip h records, whatever the clocks of their writers say: a
// trip that a compare-and-set put before the reset opens a cooldown key
// that the reset ends, even if the key is written after it. Stored times
// have millisecond precision: at is rounded up, so that a call begun the
// same millisecond before the reset began before it too.
func afterReset(h Health, by string, at time.Time) Health {
	if stored := utc(at); stored.Before(at) {
		at = stored.Add(time.Millisecond)
	} else {
		at = stored
	}
	for _, t := range []time.Time{h.LastFailure, h.LastTrip} {
		if !t.Before(at) {
			at = t.Add(time.Millisecond)
		}
	}
	return Health{ResetAt: at, ResetBy: text.Cut(by, maxBy)}
}

// afterOperatorTrip records in h an operator's cooldown (processor trip)
// of d from at as the provider's last trip, so that the provider is
// half-open when it ends, as after any cooldown, and the failures of calls
// in flight at at escalate nothing. It is not counted toward escalation:
// trips stays as it is. It reports false, and h unchanged, when the trip h
// records already runs until at+d or later: a trip never shortens one.
func afterOperatorTrip(h Health, at time.Time, d time.Duration) (Health, bool) {
	at, d = utc(at), wholeSeconds(d)
	if !at.Add(d).After(tripEnd(h, chain.CooldownPolicy{})) {
		return h, false
	}
	h.LastTrip, h.LastTripS = at, int64(d/time.Second)
	return h, true
}

// predatesReset reports whether f is the failure of a call that began
// before the last reset h records (or, when its start is unknown, failed
// before it). Such a failure belongs to the outage the operator ended: it
// is not counted, so that a reset and a failure racing it leave the same
// health in either order.
func predatesReset(h Health, f chain.Failure) bool {
	if h.ResetAt.IsZero() {
		return false
	}
	began := f.Started
	if began.IsZero() {
		began = f.At
	}
	return began.Before(h.ResetAt)
}

// resetEnds reports whether the last reset h records ended cooldown c,
// which opened before it. A trip that raced the reset can write its
// cooldown key after the reset removed the old one: this key is over all
// the same.
func resetEnds(c Cooldown, h Health) bool {
	return !h.ResetAt.IsZero() && c.opened().Before(h.ResetAt)
}

// wholeSeconds rounds up to whole seconds, at least one: KV TTLs are whole
// seconds and a sub-second TTL is refused.
func wholeSeconds(d time.Duration) time.Duration {
	s := d.Round(time.Second)
	if s < d {
		s += time.Second
	}
	return max(s, time.Second)
}

// maxReason bounds the error text stored in a KV value.
const maxReason = 300

// truncate bounds outside text stored in a KV value.
func truncate(s string) string { return text.Cut(s, maxReason) }
