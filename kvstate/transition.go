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
// key still knows the provider is cooling.
func tripEnd(h Health, p chain.CooldownPolicy) time.Time {
	if h.LastTrip.IsZero() || h.Trips == 0 {
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
