package wait

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeClock is a clock whose sleeps advance it, so pacing is tested without
// waiting.
type fakeClock struct {
	now      time.Time
	slept    []time.Duration
	cancel   context.CancelFunc // called on the sleep numbered cancelAt, if set
	sleeps   int
	cancelAt int
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.sleeps++
	if c.cancel != nil && c.sleeps == c.cancelAt {
		c.cancel()
		return ctx.Err()
	}
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return nil
}

func TestPacerKeepsAnAbsoluteSchedule(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		rate float64
		// work is how long each publish takes after its Wait returns.
		work []time.Duration
		// want is when each Wait returns, as offsets from start.
		want []time.Duration
	}{
		"ten per second, instant publishes": {
			rate: 10, work: []time.Duration{0, 0, 0, 0},
			want: []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond},
		},
		"publish time is absorbed, not added": {
			rate: 10, work: []time.Duration{30 * time.Millisecond, 30 * time.Millisecond, 0},
			want: []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond},
		},
		"a stall is made up without sleeping": {
			rate: 10, work: []time.Duration{250 * time.Millisecond, 0, 0, 0},
			want: []time.Duration{0, 250 * time.Millisecond, 250 * time.Millisecond, 300 * time.Millisecond},
		},
		"half a request per second": {
			rate: 0.5, work: []time.Duration{0, 0},
			want: []time.Duration{0, 2 * time.Second},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			clock := &fakeClock{now: start}
			p := newPacer(tt.rate, clock.Now, clock.Sleep)
			for i, work := range tt.work {
				if err := p.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
				if got := clock.now.Sub(start); got != tt.want[i] {
					t.Errorf("wait %d returned at +%s, want +%s", i, got, tt.want[i])
				}
				clock.now = clock.now.Add(work)
			}
		})
	}
}

func TestPacerWithoutRateNeverWaits(t *testing.T) {
	for _, rate := range []float64{0, -1} {
		p := NewPacer(rate)
		for range 1000 {
			if err := p.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	var nilPacer *Pacer
	if err := nilPacer.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestPacerStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clock := &fakeClock{now: time.Now(), cancel: cancel, cancelAt: 2}
	p := newPacer(100, clock.Now, clock.Sleep)
	for i := 0; ; i++ {
		err := p.Wait(ctx)
		if err == nil {
			continue
		}
		if !errors.Is(err, context.Canceled) || i != 2 {
			t.Fatalf("wait %d: %v; want context.Canceled on wait 2", i, err)
		}
		break
	}
	if err := NewPacer(0).Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("unpaced wait on an ended context: %v", err)
	}
}

func TestPacerSleepsForReal(t *testing.T) {
	p := NewPacer(50) // 20ms apart
	start := time.Now()
	for range 3 {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if elapsed := time.Since(start); elapsed < 40*time.Millisecond {
		t.Fatalf("three waits at 50/s took %s, want at least 40ms", elapsed)
	}
}
