package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/detourhq/detour/chain/providertest"
)

// memorySettle is how long an idle processor runs before its resident set
// is read as the idle one.
const memorySettle = time.Second

// memoryResult is what one memory run measured.
type memoryResult struct {
	idle, peak    int64 // bytes
	peakFromHWM   bool  // VmHWM after a reset; else the highest VmRSS sampled
	inFlight      int   // most calls the slow provider held at once
	kibPerRequest float64
	// waiting and answered are a processor's goroutine stacks and heap
	// allocations (goMemory), read when the provider first holds every call
	// and again once every answer is stored; zero for the HTTP baseline,
	// and waiting is zero when the provider never held every call.
	waiting, answered goMemory
}

// divide sets kibPerRequest: the growth from idle to peak, per call the
// provider held at once.
func (r *memoryResult) divide() {
	r.kibPerRequest = float64(r.peak-r.idle) / 1024 / float64(r.inFlight)
}

// memory runs the memory scenario once a round, and the HTTP baseline
// (RunHTTPBaseline) beside it, alternating which goes first.
func (b *Bench) memory(ctx context.Context) (*MemoryReport, error) {
	type side struct {
		name string
		run  func(context.Context) (memoryResult, error)
	}
	measured := map[string][]memoryResult{}
	sides := []side{{nameDetourHTTP, b.memoryRun}, {nameHTTPBaseline, b.httpBaselineRun}}
	err := rounds(b.opts.Rounds, sides, func(round int, s side) error {
		res, err := s.run(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		measured[s.name] = append(measured[s.name], res)
		b.progress("memory round %d/%d: %-18s idle %.1f MiB, peak %.1f MiB with %d in flight: %.1f KiB a request",
			round+1, b.opts.Rounds, s.name, mib(res.idle), mib(res.peak), res.inFlight, res.kibPerRequest)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return summarizeMemory(b.opts, measured[nameDetourHTTP], measured[nameHTTPBaseline]), nil
}

// memoryRun holds MemoryInFlight requests in one processor with as many
// workers, on a provider that answers after MemoryDelay, and compares its
// peak resident set with its idle one.
func (b *Bench) memoryRun(ctx context.Context) (res memoryResult, err error) {
	c, err := fakeChain(providertest.Slow(b.opts.MemoryDelay, providertest.OK()))
	if err != nil {
		return res, err
	}
	defer c.close()
	fake := c.fakes[0]
	n := b.opts.MemoryInFlight
	run := runSpec{pipe: detourPipe, procs: 1, workers: n, maxAckPending: max(defaultMaxAckPending(), 2*n), chain: c}
	if err := b.reset(ctx, run.pipe, run.maxAckPending); err != nil {
		return res, err
	}
	if err := b.broker.resume(ctx, run.pipe.stream, run.pipe.consumer); err != nil {
		return res, err
	}
	ps, err := b.start(ctx, run)
	if err != nil {
		return res, err
	}
	defer func() {
		if stopErr := stopProcs(ps); err == nil {
			err = stopErr
		}
	}()
	pid := ps[0].cmd.Process.Pid
	select {
	case <-time.After(memorySettle):
	case <-ctx.Done():
		return res, context.Cause(ctx)
	}
	if res.idle, res.peakFromHWM, err = idleMemory(pid); err != nil {
		return res, fmt.Errorf("reading the idle resident set: %w", err)
	}
	res.peak = res.idle // the peak window starts at the idle reading
	tag := b.tag()
	w, err := b.watchResults(ctx, run.pipe, tag, n)
	if err != nil {
		return res, err
	}
	defer w.stop()
	if err := b.preload(ctx, run.pipe.subject, tag, n); err != nil {
		return res, err
	}
	w.restartClock()
	waited := make(chan error, 1)
	go func() { waited <- w.wait(ctx, b.opts.Stall, ps) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case err := <-waited:
			if err != nil {
				return res, err
			}
			done = true
		case <-tick.C:
		}
		res.inFlight = max(res.inFlight, fake.InFlight())
		if res.peak, err = samplePeak(pid, res.peakFromHWM, res.peak); err != nil {
			return res, err
		}
		if res.inFlight == n && res.waiting.stacks == 0 {
			if res.waiting, err = processorMemory(ctx, ps[0].metrics); err != nil {
				return res, err
			}
		}
	}
	if res.inFlight == 0 {
		return res, errors.New("the slow provider never held a request")
	}
	if res.answered, err = processorMemory(ctx, ps[0].metrics); err != nil {
		return res, err
	}
	res.divide()
	return res, nil
}
