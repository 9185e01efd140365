package chain

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// Backoff returns the wait before retry number attempt (from 0): uniformly
// random between zero and base·2^attempt capped at max ("full jitter"), so
// that workers retrying one outage spread out. rnd returns [0, 1).
func Backoff(attempt int, base, max time.Duration, rnd func() float64) time.Duration {
	if base <= 0 {
		return 0
	}
	ceiling := min(float64(base)*math.Pow(2, float64(attempt)), float64(max)) // +Inf too
	return time.Duration(rnd() * ceiling)
}

// ParseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3):
// delay-seconds (decimals, which some gateways send, rounded up) or an
// HTTP-date. ok is false when absent or unreadable; a past date gives zero,
// and a value beyond a Duration is capped.
func ParseRetryAfter(value string, now time.Time) (d time.Duration, ok bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if d, ok := parseDecimal(value, time.Second); ok {
		if part := d % time.Second; part != 0 {
			d += time.Second - part // below maxHint, a whole second count: no overflow
		}
		return d, true
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return until(t, now), true
}
