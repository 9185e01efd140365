package kvstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/detourhq/detour/chain"
)

// Health is the value of <provider>.health.
type Health struct {
	// ConsecutiveFailures counts counted failures since the last success.
	ConsecutiveFailures int         `json:"consecutive_failures"`
	LastClass           chain.Class `json:"last_class,omitzero"`
	LastError           string      `json:"last_error,omitempty"`
	LastFailure         time.Time   `json:"last_failure,omitzero"`
	LastSuccess         time.Time   `json:"last_success,omitzero"`
	// Trips counts cooldowns opened within the trip window; it sets the
	// escalation of the next cooldown.
	Trips    int       `json:"trips"`
	LastTrip time.Time `json:"last_trip,omitzero"`
	// LastTripS is the length in whole seconds of the last trip's
	// cooldown, which can differ from the escalated one (an auth cooldown,
	// a long Retry-After).
	LastTripS int64 `json:"last_trip_s,omitempty"`
	// ResetAt and ResetBy record the operator's last reset: when, and who
	// (user@host). A reset clears every other field; later writes carry
	// these on (see predatesReset, resetEnds).
	ResetAt time.Time `json:"reset_at,omitzero"`
	ResetBy string    `json:"reset_by,omitempty"`
}

// Cooldown is the value of <provider>.cooldown. The key's TTL, not this value,
// ends the cooldown; Until is stored because KV entries do not expose a TTL.
type Cooldown struct {
	Until time.Time `json:"until"`
	// Class is the failure class that tripped the provider; none for an
	// operator's.
	Class     chain.Class `json:"class,omitzero"`
	Reason    string      `json:"reason"`
	Trip      int         `json:"trip"`
	DurationS int64       `json:"duration_s"`
	// By is the processor that opened it (<hostname>-<pid>-<random>), or
	// the operator (user@host) who did.
	By string `json:"by"`
	// Operator is set on a cooldown an operator opened (processor trip).
	Operator bool `json:"operator,omitempty"`
}

// opened returns when the cooldown began: its until less its length.
func (c Cooldown) opened() time.Time {
	return c.Until.Add(-time.Duration(c.DurationS) * time.Second)
}

// Key suffixes in the bucket: <provider>.health and <provider>.cooldown.
const (
	SuffixHealth   = "health"
	SuffixCooldown = "cooldown"
)

// HealthKey returns the bucket key of a provider's health.
func HealthKey(provider string) string { return provider + "." + SuffixHealth }

// CooldownKey returns the bucket key of a provider's cooldown.
func CooldownKey(provider string) string { return provider + "." + SuffixCooldown }

// utc normalises a time for storage: UTC, millisecond precision.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Millisecond)
}

// The bucket is the fleet's own, but a key edited by hand into something no
// writer makes must not break every reader (a time past year 9999 cannot be
// written as JSON, and status -json writes every row): a value is checked
// once, where it is decoded, against the rules every writer keeps.

// maxCount bounds failure and trip counts, far below an overflow.
const maxCount = 1_000_000_000

// checked is a value of the bucket that knows the rules its writers keep.
type checked[T any] interface {
	*T
	check() error
}

// decode reads a value of the bucket and checks it.
func decode[T any, P checked[T]](data []byte) (T, error) {
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return v, err
	}
	return v, P(&v).check()
}

// check reports the rules h breaks.
func (h *Health) check() error {
	return errors.Join(count("consecutive_failures", h.ConsecutiveFailures), count("trips", h.Trips),
		length("last_trip_s", h.LastTripS),
		writable("last_failure", h.LastFailure), writable("last_success", h.LastSuccess),
		writable("reset_at", h.ResetAt), writable("last_trip", h.LastTrip),
		writable("last_trip + last_trip_s", h.LastTrip.Add(time.Duration(h.LastTripS)*time.Second)))
}

// check reports the rules c breaks.
func (c *Cooldown) check() error {
	return errors.Join(count("trip", c.Trip), length("duration_s", c.DurationS), writable("until", c.Until))
}

// check reports whether p's until can be written.
func (p *Probe) check() error { return writable("until", p.Until) }

func count(field string, n int) error {
	if n < 0 || n > maxCount {
		return fmt.Errorf("%s %d is outside 0 to %d", field, n, maxCount)
	}
	return nil
}

// length checks a length in whole seconds: from 0 to a century.
func length(field string, s int64) error {
	if s < 0 || s > 100*365*24*3600 {
		return fmt.Errorf("%s %d is outside 0 to a hundred years", field, s)
	}
	return nil
}

// writable checks that JSON can write t: in the years 0000 to 9999 UTC.
func writable(field string, t time.Time) error {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("%s %s is outside the years 0000 to 9999", field, t.Format(time.RFC3339))
	}
	return nil
}

// maxBy bounds the processor id or operator written in a value.
const maxBy = 300
