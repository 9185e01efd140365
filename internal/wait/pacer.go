package wait

import (
	"context"
	"time"
)

// Pacer spaces publishes at a fixed rate. It keeps an absolute schedule (the
// i-th Wait returns at start + i/rate, start being the first call), so a slow
// publish is made up for by the next ones instead of lowering the rate: the
// load a run offers does not bend to how fast the server answers. A nil
// Pacer, or one with no rate, never waits.
type Pacer struct {
	interval time.Duration
	next     time.Time // zero until the first Wait
	now      func() time.Time
	sleep    func(ctx context.Context, d time.Duration) error
}

// NewPacer returns a Pacer for rate requests per second; rate <= 0 means no
// pacing.
func NewPacer(rate float64) *Pacer {
	if rate <= 0 {
		return &Pacer{}
	}
	return newPacer(rate, time.Now, Sleep)
}

func newPacer(rate float64, now func() time.Time, sleep func(context.Context, time.Duration) error) *Pacer {
	interval := time.Duration(float64(time.Second) / rate)
	if interval <= 0 {
		interval = 1 // a rate past a billion per second is as good as none
	}
	return &Pacer{interval: interval, now: now, sleep: sleep}
}

// Wait blocks until the next publish is due, or returns ctx's error.
func (p *Pacer) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil || p == nil || p.interval == 0 {
		return err
	}
	now := p.now()
	if p.next.IsZero() {
		p.next = now
	}
	due := p.next
	p.next = p.next.Add(p.interval)
	if d := due.Sub(now); d > 0 {
		return p.sleep(ctx, d)
	}
	return nil
}
