package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// backlogResult is what one run over a preloaded backlog measured.
type backlogResult struct {
	requests  int
	elapsed   time.Duration // from the release of the backlog to the last result
	reqPerSec float64
	// cpuPerReq is the CPU time of every process of the run, from the
	// release to the last result, divided by the requests. cpuLive is false
	// when /proc could not be read and the processes' whole-life rusage was
	// used instead.
	cpuPerReq time.Duration
	cpuLive   bool
	// benchCPUPerReq is the bench process's own CPU time over the same
	// window, divided by the requests: its reading back of results (and
	// serving any fake provider), and the embedded server's work when the
	// server is embedded. Zero when /proc cannot be read.
	benchCPUPerReq time.Duration
	resultBytes    float64
	notOK          int
}

// backlogHooks let a scenario look at a run while it goes on.
type backlogHooks struct {
	// released runs once the processes are consuming, just before the
	// backlog is released.
	released func(ctx context.Context) error
}

// backlog queues n requests, starts the processes of run with the consumer
// paused, releases the backlog once every process is consuming, and
// measures from there until the last result is stored.
func (b *Bench) backlog(ctx context.Context, run runSpec, n int, hooks backlogHooks) (res backlogResult, _ error) {
	pipe := run.pipe
	if err := b.reset(ctx, pipe, run.maxAckPending); err != nil {
		return res, err
	}
	if err := b.broker.pause(ctx, pipe.stream, pipe.consumer); err != nil {
		return res, fmt.Errorf("pausing %s: %w", pipe.consumer, err)
	}
	// A failed run must not leave the consumer paused for the next one.
	defer func() { _ = b.broker.resume(context.WithoutCancel(ctx), pipe.stream, pipe.consumer) }()
	tag := b.tag()
	w, err := b.watchResults(ctx, pipe, tag, n)
	if err != nil {
		return res, err
	}
	defer w.stop()
	if err := b.preload(ctx, pipe.subject, tag, n); err != nil {
		return res, err
	}
	ps, err := b.start(ctx, run)
	if err != nil {
		return res, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = stopProcs(ps)
		}
	}()
	if hooks.released != nil {
		if err := hooks.released(ctx); err != nil {
			return res, err
		}
	}
	cpu0, live0 := cpuSample(ps)
	bench0, benchErr0 := procCPU(os.Getpid())
	if w.seenCount() != 0 {
		return res, errors.New("results arrived while the consumer was paused")
	}
	start, err := b.broker.release(ctx, pipe.stream, pipe.consumer)
	if err != nil {
		return res, fmt.Errorf("releasing %s: %w", pipe.consumer, err)
	}
	w.restartClock()
	if err := w.wait(ctx, b.opts.Stall, ps); err != nil {
		return res, err
	}
	cpu1, live1 := cpuSample(ps)
	bench1, benchErr1 := procCPU(os.Getpid())
	stopped = true
	if err := stopProcs(ps); err != nil {
		return res, err
	}
	cpu := cpu1 - cpu0
	res.cpuLive = live0 && live1
	if !res.cpuLive {
		cpu = 0
		for _, p := range ps {
			cpu += p.exitCPU()
		}
	}
	_, last, meanBytes, notOK := w.results()
	res.requests, res.elapsed, res.resultBytes, res.notOK = n, last.Sub(start), meanBytes, notOK
	res.reqPerSec = float64(n) / res.elapsed.Seconds()
	res.cpuPerReq = cpu / time.Duration(n)
	if benchErr0 == nil && benchErr1 == nil {
		res.benchCPUPerReq = (bench1 - bench0) / time.Duration(n)
	}
	return res, nil
}
