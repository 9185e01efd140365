package stream

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/wire"
)

// TestADeliveryExpiresAtItsDeadlineOrItsTTL: a request expires at its own
// deadline, or at its publish time plus the TTL, whichever comes first. The
// requests stream removes nothing at that age, so no margin is kept before
// it.
func TestADeliveryExpiresAtItsDeadlineOrItsTTL(t *testing.T) {
	published := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		ttl      time.Duration
		deadline time.Time
		want     time.Time
		named    bool // the request names its deadline (one not zero always does)
	}{
		{"no deadline, the default TTL", 24 * time.Hour, time.Time{}, published.Add(24 * time.Hour), false},
		{"no deadline, a short TTL", 10 * time.Second, time.Time{}, published.Add(10 * time.Second), false},
		{"an earlier deadline", 24 * time.Hour, published.Add(time.Hour), published.Add(time.Hour), false},
		{"a deadline just inside", 10 * time.Second, published.Add(9800 * time.Millisecond), published.Add(9800 * time.Millisecond), false},
		{"a later deadline", 24 * time.Hour, published.Add(48 * time.Hour), published.Add(24 * time.Hour), false},
		// The zero time is a time like any other, long past.
		{"the year 1", 24 * time.Hour, time.Time{}, time.Time{}, true},
	}
	for _, tt := range tests {
		req := wire.Decoded{DeadlineAt: tt.deadline}
		if !tt.deadline.IsZero() || tt.named {
			req.Deadline = tt.deadline.Format(time.RFC3339Nano)
		}
		d := delivery{
			p:    &Processor{cfg: ProcessorConfig{RequestTTL: tt.ttl}},
			meta: &jetstream.MsgMetadata{Timestamp: published},
			req:  req,
		}
		if got := d.deadline(); !got.Equal(tt.want) {
			t.Errorf("%s: deadline %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestARetryWaitsForTheEarliestReopen: a request that found every provider
// cooling, or whose providers called all rejected it while the others
// cooled (Undecided), comes back at the earliest reopen plus jitter, not
// after the backoff; one that met outages comes back after the backoff,
// never before the reopen; no delay runs past the deadline.
func TestARetryWaitsForTheEarliestReopen(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	reopen, deadline := now.Add(2*time.Second), now.Add(time.Hour)
	const backoff, jitter = 30 * time.Second, 100 * time.Millisecond
	for _, tc := range []struct {
		name     string
		ex       chain.ExhaustedError
		deadline time.Time
		want     time.Duration
	}{
		{"all cooling", chain.ExhaustedError{AllCooling: true, ReopenAt: reopen}, deadline, 2100 * time.Millisecond},
		{"undecided", chain.ExhaustedError{Undecided: true, ReopenAt: reopen}, deadline, 2100 * time.Millisecond},
		{"outages", chain.ExhaustedError{ReopenAt: reopen}, deadline, backoff},
		{"outages, a later reopen", chain.ExhaustedError{ReopenAt: now.Add(time.Minute)}, deadline, time.Minute + jitter},
		{"outages, no reopen", chain.ExhaustedError{}, deadline, backoff},
		{"a reopen passed", chain.ExhaustedError{AllCooling: true, ReopenAt: now.Add(-time.Second)}, deadline, 10 * time.Millisecond},
		{"the deadline first", chain.ExhaustedError{Undecided: true, ReopenAt: now.Add(time.Minute)}, now.Add(5 * time.Second), 5 * time.Second},
		{"the deadline passed", chain.ExhaustedError{}, now.Add(-time.Second), 0},
	} {
		if got := retryDelay(&tc.ex, backoff, jitter, now, tc.deadline); got != tc.want {
			t.Errorf("%s: delay %v, want %v", tc.name, got, tc.want)
		}
	}
}
