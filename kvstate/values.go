package kvstate

import (
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
