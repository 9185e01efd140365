package stream

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// heartbeat tells the server the delivery is still being worked on every
// AckWait/3, so a slow provider call is not redelivered to another worker.
// No beat is sent once the returned stop has returned.
func (d *delivery) heartbeat(ctx context.Context) (stop func()) {
	b := beaters.Get().(*beater)
	b.start(ctx, d.msg, d.p.cfg.AckWait/3) // AckWait is positive: NewProcessor refuses zero
	return b.stop
}

// beaters reuses heartbeats with their timers: most deliveries end long
// before their first beat, and a timer made for each would be most of what
// a fast chain allocates per request.
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

// beat runs on the timer. A beat that fires as stop runs finds msg nil; one
// left over from an earlier delivery of this beater, which is harmless,
// beats for the current one a little early.
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
