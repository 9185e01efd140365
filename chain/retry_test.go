package chain_test

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
)

var retryNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	// The largest whole-second delay a time.Duration can hold.
	maxSecs := time.Duration(math.MaxInt64/int64(time.Second)) * time.Second
	tests := []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"seconds", "30", 30 * time.Second, true},
		{"zero seconds", "0", 0, true},
		{"seconds with spaces", "  7 ", 7 * time.Second, true},
		{"http date in the future", retryNow.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"http date in the past", retryNow.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"http date now", retryNow.Format(http.TimeFormat), 0, true},
		{"rfc850 date", retryNow.Add(time.Minute).Format(time.RFC850), time.Minute, true},
		{"empty", "", 0, false},
		{"garbage", "soon", 0, false},
		{"fractional seconds round up", "1.5", 2 * time.Second, true},
		{"fractional zero stays whole", "2.000", 2 * time.Second, true},
		{"tiny fraction rounds up", "0.001", time.Second, true},
		{"huge fraction is capped", "99999999999999999999.5", maxSecs, true},
		{"dot without digits", "1.", 0, false},
		{"exponent", "1e3", 0, false},
		{"not a number", "NaN", 0, false},
		{"infinity", "Inf", 0, false},
		{"negative", "-5", 0, false},
		{"huge is capped, not overflowed", "9223372036854775807", maxSecs, true},
		{"just above the cap", "9223372037", maxSecs, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := chain.ParseRetryAfter(tt.value, retryNow)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestParseRetryAfterBeyondInt64IsNeverNegative: a value too long for int64
// must not wrap around into a negative wait.
func TestParseRetryAfterBeyondInt64IsNeverNegative(t *testing.T) {
	got, _ := chain.ParseRetryAfter("99999999999999999999999", retryNow)
	if got < 0 {
		t.Errorf("ParseRetryAfter(huge) = %v, want >= 0", got)
	}
}

// TestParseRetryAfterFarFutureDateDoesNotOverflow: a date centuries ahead is
// more than a Duration holds; the wait saturates instead of going negative.
func TestParseRetryAfterFarFutureDateDoesNotOverflow(t *testing.T) {
	far := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Format(http.TimeFormat)
	got, ok := chain.ParseRetryAfter(far, retryNow)
	if !ok || got <= 0 {
		t.Errorf("ParseRetryAfter(%q) = %v, %v; want a large positive wait", far, got, ok)
	}
}

// ceilingFor is min(max, base·2^attempt), computed in floating point so the
// test itself cannot overflow.
func ceilingFor(attempt int, base, max time.Duration) float64 {
	return math.Min(float64(max), float64(base)*math.Pow(2, float64(attempt)))
}

func TestBackoffNeverExceedsExponentialCeilingOrMax(t *testing.T) {
	const almostOne = 0.999999999
	for _, limits := range []struct{ base, max time.Duration }{
		{100 * time.Millisecond, 10 * time.Second},
		{500 * time.Millisecond, 500 * time.Millisecond},
		{time.Second, time.Hour},
		{time.Nanosecond, time.Duration(math.MaxInt64)},
	} {
		for attempt := 0; attempt <= 200; attempt++ {
			for _, r := range []float64{0, 0.25, 0.5, almostOne} {
				got := chain.Backoff(attempt, limits.base, limits.max, func() float64 { return r })
				if got < 0 || float64(got) > ceilingFor(attempt, limits.base, limits.max) {
					t.Fatalf("Backoff(%d, %v, %v, rnd=%v) = %v, want within [0, %v]",
						attempt, limits.base, limits.max, r, got, time.Duration(ceilingFor(attempt, limits.base, limits.max)))
				}
			}
		}
	}
}

func TestBackoffIsZeroWhenRandomDrawIsZero(t *testing.T) {
	zero := func() float64 { return 0 }
	for attempt := range 70 {
		if got := chain.Backoff(attempt, time.Second, time.Minute, zero); got != 0 {
			t.Fatalf("Backoff(%d, rnd=0) = %v, want 0", attempt, got)
		}
	}
}

func TestBackoffIsDeterministicWithInjectedRandom(t *testing.T) {
	half := func() float64 { return 0.5 }
	tests := []struct {
		attempt int
		want    time.Duration
	}{
		{0, 50 * time.Millisecond},  // half of 100ms
		{1, 100 * time.Millisecond}, // half of 200ms
		{3, 400 * time.Millisecond}, // half of 800ms
		{10, 5 * time.Second},       // half of the 10s cap
		{1000, 5 * time.Second},     // 2^1000 is +Inf: still the cap
	}
	for _, tt := range tests {
		got := chain.Backoff(tt.attempt, 100*time.Millisecond, 10*time.Second, half)
		if got != tt.want {
			t.Errorf("Backoff(%d, 100ms, 10s, rnd=0.5) = %v, want %v", tt.attempt, got, tt.want)
		}
		if again := chain.Backoff(tt.attempt, 100*time.Millisecond, 10*time.Second, half); again != got {
			t.Errorf("Backoff(%d) not deterministic: %v then %v", tt.attempt, got, again)
		}
	}
}

func TestBackoffWithoutBaseIsZero(t *testing.T) {
	one := func() float64 { return 0.99 }
	if got := chain.Backoff(3, 0, time.Minute, one); got != 0 {
		t.Errorf("Backoff with base 0 = %v, want 0", got)
	}
}

// FuzzParseRetryAfter feeds the header parser whatever a provider might send:
// it must never panic, never return a negative wait, and say ok=false with a
// zero wait when it cannot read the value.
func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{
		"", "0", "1", "120", "-1", "+5", "1.5", "2.5", "0.0001", ".5", "1e9", "NaN", "-Inf", " 30 ", "soon",
		"9223372036854775807", "99999999999999999999999",
		retryNow.Add(time.Minute).Format(http.TimeFormat),
		retryNow.Add(-time.Minute).Format(http.TimeFormat),
		"Mon, 02 Jan 2006 15:04:05 GMT",
		"Fri, 31 Dec 9999 23:59:59 GMT",
		"Monday, 02-Jan-06 15:04:05 GMT",
		"Mon Jan  2 15:04:05 2006",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		d, ok := chain.ParseRetryAfter(value, retryNow)
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, negative", value, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false; a failed parse must give 0", value, d)
		}
		// retryNow is on a whole second, so every reading is whole seconds:
		// decimals are rounded up, never down or left fractional.
		if d%time.Second != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, not whole seconds", value, d)
		}
	})
}
