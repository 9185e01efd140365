package chain

import (
	"context"
	"time"
)

// State is the shared memory of provider health that the chain consults and
// feeds. It is implemented by package kvstate on a JetStream KV bucket; reads
// come from a local mirror and must not block on the network.
type State interface {
	// Admit decides whether a pass may call provider at now: not while it
	// cools, and in half-open only the one worker that wins the probe lease
	// (held at most lease). Reads the mirror; only a probe attempt writes.
	Admit(ctx context.Context, provider string, now time.Time, lease time.Duration) Admission
	// ReleaseProbe gives back the probe lease that Admit granted as lease
	// (Admission.Lease), after the probe's outcome has been recorded. A
	// lease that lapsed and was taken by another worker is left alone.
	ReleaseProbe(ctx context.Context, provider string, lease uint64) error
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
	// Started is when the failed attempt began; zero when unknown. A call
	// that began before the provider's last trip was in flight when that
	// cooldown opened: its failure is counted but escalates nothing.
	Started time.Time
	// CooldownFor, when positive, opens a cooldown of exactly this length
	// at once (auth failures, a Retry-After longer than max_retry_wait;
	// docs/failures.md, Cooldowns), also when this failure reaches the threshold.
	CooldownFor time.Duration
	Policy      CooldownPolicy
}

// Admission is the state's answer to "may this worker call the provider now?".
type Admission struct {
	// Allowed is set when the call may go ahead.
	Allowed bool
	// Probe is set when this call is the one half-open probe across all
	// processors; the chain releases it with ReleaseProbe after recording
	// the outcome.
	Probe bool
	// Lease identifies the probe lease when Probe is set, for ReleaseProbe:
	// two workers of one processor may each hold one in turn, when the
	// first outlived its lease.
	Lease uint64
	// Until, when not allowed, is when the provider may be tried again.
	Until time.Time
}
