package stream

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// heartbeat sends InProgress every AckWait/3, so a slow provider call is
// not redelivered meanwhile, until the returned stop has returned.
func (d *delivery) heartbeat(ctx context.Context) (stop func()) {
	b := beaters.Get().(*beater)
	b.start(ctx, d.msg, d.p.cfg.AckWait/3) // AckWait is positive: NewProcessor refuses zero
	return b.stop
}

// beaters reuses heartbeats with their timers: most deliveries end before
// their first beat, and a timer each would be most of a fast chain's
// allocations.
var beaters sync.Pool

func init() {
	beaters.New = func() any {
		b := &beater{}
		b.stop = b.stopAndRelease
		return b
	}
}

// beater sends InProgress for one delivery at a time.
type beater struct {
	mu    sync.Mutex
	t     *time.Timer
	ctx   context.Context
	msg   jetstream.Msg // nil when stopped
	every time.Duration
	stop  func() // stopAndRelease, made once
}

func (b *beater) start(ctx context.Context, msg jetstream.Msg, every time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ctx, b.msg, b.every = ctx, msg, every
	if b.t == nil {
		b.t = time.AfterFunc(every, b.beat)
		return
	}
	b.t.Reset(every)
}

// beat runs on the timer. One firing as stop runs finds msg nil; one left
// from an earlier delivery beats, harmlessly, early for this one.
func (b *beater) beat() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.msg == nil || b.ctx.Err() != nil {
		return
	}
	_ = b.msg.InProgress()
	b.t.Reset(b.every)
}

func (b *beater) stopAndRelease() {
	b.mu.Lock()
	b.t.Stop()
	b.ctx, b.msg = nil, nil // no beat after stop returns
	b.mu.Unlock()
	beaters.Put(b)
}
