package stream

import (
	"context"
	"time"

	"github.com/detourhq/detour/internal/wait"
)

// holding paces the tries of a store a worker makes while it keeps the
// delivery: the first retry after publishRetryBase, doubling up to
// publishRetryMax, the last at until, with heartbeats meanwhile since a try
// may take longer than AckWait.
type holding struct {
	d        *delivery
	ctx      context.Context // the worker's: its end (a shutdown) ends the retries
	until    time.Time
	delay    time.Duration
	stopBeat func()
}

func (d *delivery) hold(ctx context.Context, until time.Time) holding {
	return holding{d: d, ctx: ctx, until: until, delay: publishRetryBase}
}

func (h *holding) more() bool {
	return h.ctx.Err() == nil && h.d.p.cfg.Now().Before(h.until)
}

// wait keeps the delivery until the next try, never past until; false when
// ctx ended first.
func (h *holding) wait() bool {
	if h.stopBeat == nil {
		_ = h.d.msg.InProgress()
		h.stopBeat = h.d.heartbeat(h.ctx)
	}
	if err := wait.Sleep(h.ctx, min(h.delay, h.until.Sub(h.d.p.cfg.Now()))); err != nil {
		return false
	}
	h.delay = min(h.delay*2, publishRetryMax)
	return true
}

func (h *holding) stop() {
	if h.stopBeat != nil {
		h.stopBeat()
	}
}
