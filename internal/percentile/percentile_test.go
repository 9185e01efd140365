package percentile_test

import (
	"testing"
	"time"

	"github.com/detourhq/detour/internal/percentile"
)

func ms(n ...int) []time.Duration {
	out := make([]time.Duration, len(n))
	for i, v := range n {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func seq(from, to int) []time.Duration {
	var n []int
	for i := from; i <= to; i++ {
		n = append(n, i)
	}
	return ms(n...)
}

func TestPercentileIsNearestRank(t *testing.T) {
	tests := map[string]struct {
		sorted        []time.Duration
		p50, p95, p99 time.Duration
	}{
		"none":            {nil, 0, 0, 0},
		"one":             {ms(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
		"two":             {ms(1, 9), 1 * time.Millisecond, 9 * time.Millisecond, 9 * time.Millisecond},
		"three":           {ms(1, 2, 3), 2 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond},
		"four":            {ms(1, 2, 3, 4), 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond},
		"ten":             {seq(1, 10), 5 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond},
		"twenty":          {seq(1, 20), 10 * time.Millisecond, 19 * time.Millisecond, 20 * time.Millisecond},
		"hundred":         {seq(1, 100), 50 * time.Millisecond, 95 * time.Millisecond, 99 * time.Millisecond},
		"thousand":        {seq(1, 1000), 500 * time.Millisecond, 950 * time.Millisecond, 990 * time.Millisecond},
		"one slow of 100": {append(ms(make([]int, 99)...), time.Second), 0, 0, 0},
		"two slow of 100": {append(ms(make([]int, 98)...), time.Second, time.Second), 0, 0, time.Second},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			for p, want := range map[float64]time.Duration{50: tt.p50, 95: tt.p95, 99: tt.p99} {
				if got := percentile.Of(tt.sorted, p); got != want {
					t.Errorf("p%v = %s, want %s", p, got, want)
				}
			}
		})
	}
	if got := percentile.Of(seq(1, 10), 100); got != 10*time.Millisecond {
		t.Errorf("p100 = %s, want the largest", got)
	}
}
