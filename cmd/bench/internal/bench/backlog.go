package bench

import (
	"context"
	"errors"
	"os"
	"time"
)

// backlogResult is what one run over a preloaded backlog measured, over
// the window from the release of the backlog to the last result; its
// figures are those of PipelineThroughput, per request.
type backlogResult struct {
	requests       int
	reqPerSec      float64
	cpuPerReq      time.Duration // of every process of the run
	cpuLive        bool          // PipelineThroughput.CPUFromProc
	benchCPUPerReq time.Duration
	resultBytes    float64
	notOK          int
}

// backlog queues n requests, starts the processes of run with the consumer
// paused, releases the backlog once every process is consuming, and
// measures from there until the last result is stored. released, unless
// nil, runs just before the release, with the watch reading the results.
func (b *Bench) backlog(ctx context.Context, run runSpec, n int, released func(context.Context, *resultWatch) error) (res backlogResult, _ error) {
	pipe := run.pipe
	if err := b.broker.reset(ctx, pipe, run.maxAckPending, true); err != nil {
		return res, err
	}
	// A failed run must not leave the consumer paused on the server.
	defer func() { _ = b.broker.resume(context.WithoutCancel(ctx), pipe) }()
	w, err := b.watchResults(ctx, pipe, n)
	if err != nil {
		return res, err
	}
	defer w.cc.Stop()
	if _, err := b.publish(ctx, w, 0, nil); err != nil {
		return res, err
	}
	ps, err := b.start(ctx, run)
	if err != nil {
		return res, err
	}
	defer func() { _ = stopProcs(ps) }() // stopped already unless the run failed
	if released != nil {
		if err := released(ctx, w); err != nil {
			return res, err
		}
	}
	cpu0, live0 := cpuSample(ps)
	bench0, benchErr0 := procCPU(os.Getpid())
	if w.seenCount() != 0 {
		return res, errors.New("results arrived while the consumer was paused")
	}
	start, err := b.broker.release(ctx, pipe)
	if err != nil {
		return res, err
	}
	if err := w.wait(ctx, b.opts.Stall, ps); err != nil {
		return res, err
	}
	cpu1, live1 := cpuSample(ps)
	bench1, benchErr1 := procCPU(os.Getpid())
	if err := stopProcs(ps); err != nil {
		return res, err
	}
	cpu := cpu1 - cpu0
	if res.cpuLive = live0 && live1; !res.cpuLive {
		cpu = 0
		for _, p := range ps {
			cpu += p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
		}
	}
	_, last, meanBytes, notOK := w.results()
	res.requests, res.resultBytes, res.notOK = n, meanBytes, notOK
	res.reqPerSec = float64(n) / last.Sub(start).Seconds()
	res.cpuPerReq = cpu / time.Duration(n)
	if benchErr0 == nil && benchErr1 == nil {
		res.benchCPUPerReq = (bench1 - bench0) / time.Duration(n)
	}
	return res, nil
}
