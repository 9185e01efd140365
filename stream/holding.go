package stream

import (
	"context"
	"time"

	"github.com/detourhq/detour/internal/wait"
)

// holding paces the tries of a store that a worker makes while it keeps the
// delivery, rather than hand back a request it has paid a provider for: the
// first retry after publishRetryBase, each wait twice the last up to
// publishRetryMax, the last try at until, and InProgress heartbeats
// meanwhile, since a try may take publishTimeout, longer than AckWait.
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

// more reports whether another try may come: ctx has not ended and until
// is still ahead.
func (h *holding) more() bool {
	return h.ctx.Err() == nil && h.d.p.cfg.Now().Before(h.until)
}

// wait keeps the delivery until the next try is due, never past until, and
// reports whether it is: false when ctx ended first.
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

// stop ends the heartbeats, if any.
func (h *holding) stop() {
	if h.stopBeat != nil {
		h.stopBeat()
	}
}
