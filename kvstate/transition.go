package kvstate

import (
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/text"
)

// afterFailure is the pure health transition for one counted failure. It
// returns the new health and, when this failure trips the provider, the
// cooldown to open (zero otherwise). cooling says whether the mirror shows a
// cooldown running, in which case no new trip is counted: failures of calls
// that were already in flight must not escalate the next cooldown.
func afterFailure(h Health, f chain.Failure, cooling bool) (Health, time.Duration) {
	at := utc(f.At)
	h.ConsecutiveFailures++
	h.LastClass, h.LastError, h.LastFailure = f.Class, truncate(f.Error), at
	p := f.Policy
	if p.FailureThreshold <= 0 || cooling || tripRunning(h, p, at) {
		return h, 0
	}
	if h.ConsecutiveFailures < p.FailureThreshold && f.CooldownFor <= 0 {
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

// tripRunning reports whether the cooldown of the last trip recorded in h is
// still running at at. It is read from the health value itself, so concurrent
// writers serialised by compare-and-set agree on it even before the cooldown
// key reaches their mirrors.
func tripRunning(h Health, p chain.CooldownPolicy, at time.Time) bool {
	if h.LastTrip.IsZero() || h.Trips == 0 {
		return false
	}
	d := time.Duration(h.LastTripS) * time.Second
	if d <= 0 { // a value written before last_trip_s was stored
		d = wholeSeconds(escalate(p, h.Trips))
	}
	return at.Before(h.LastTrip.Add(d))
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

// wholeSeconds rounds up to whole seconds, at least one: KV TTLs are whole
// seconds and a sub-second TTL is refused.
func wholeSeconds(d time.Duration) time.Duration {
	s := d.Round(time.Second)
	if s < d {
		s += time.Second
	}
	return max(s, time.Second)
}

// truncate bounds outside text stored in a KV value.
func truncate(s string) string { return text.Cut(s, 300) }
