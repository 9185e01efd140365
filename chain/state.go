package chain

import (
	"context"
	"time"
)

// State is the shared memory of provider health that the chain consults and
// feeds. It is implemented by package kvstate on a JetStream KV bucket; reads
// come from a local mirror and must not block on the network.
type State interface {
	// Cooling reports whether provider is in a cooldown at now, and when the
	// cooldown ends.
	Cooling(provider string, now time.Time) (until time.Time, cooling bool)
	// RecordFailure records a failed attempt. It opens a cooldown when the
	// failure reaches the provider's threshold or asks for one at once.
	RecordFailure(ctx context.Context, provider string, f Failure) error
	// RecordSuccess records a successful attempt; it writes only when there
	// were failures to reset.
	RecordSuccess(ctx context.Context, provider string) error
}

// CooldownPolicy is the per-provider cooldown configuration (chain file knobs).
type CooldownPolicy struct {
	// FailureThreshold is the number of consecutive counted failures that
	// opens a cooldown; 0 disables cooldowns for the provider.
	FailureThreshold int
	// Cooldown is the first cooldown's length; later trips within TripWindow
	// double it, up to MaxCooldown.
	Cooldown, MaxCooldown, TripWindow time.Duration
	// AuthCooldown is opened at once on an auth failure.
	AuthCooldown time.Duration
}

// Failure describes one failed attempt to the state.
type Failure struct {
	Class Class
	Error string
	At    time.Time
	// CooldownFor, when positive, opens a cooldown of exactly this length at
	// once (auth failures, a Retry-After longer than max_retry_wait).
	CooldownFor time.Duration
	Policy      CooldownPolicy
}
