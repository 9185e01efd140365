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
	// LastTripS is the length in whole seconds of the cooldown the last trip
	// opened. It can differ from the escalated length (an auth cooldown, a
	// long Retry-After), and tripRunning needs the real one.
	LastTripS int64 `json:"last_trip_s,omitempty"`
}

// Cooldown is the value of <provider>.cooldown. The key's TTL, not this value,
// ends the cooldown; Until is stored because KV entries do not expose a TTL.
type Cooldown struct {
	Until     time.Time   `json:"until"`
	Class     chain.Class `json:"class"`
	Reason    string      `json:"reason"`
	Trip      int         `json:"trip"`
	DurationS int64       `json:"duration_s"`
	By        string      `json:"by"`
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
