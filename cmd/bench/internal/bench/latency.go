package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/percentile"
	"github.com/detourhq/detour/internal/wait"
)

// latencyResult is what one run at the offered rate measured.
type latencyResult struct {
	p50, p99 time.Duration
	n        int
}

// latency measures every variant at the offered rate, one process each.
func (b *Bench) latency(ctx context.Context) (*LatencyReport, error) {
	measured := map[string][]latencyResult{}
	err := rounds(b.opts.Rounds, variants, func(round int, v variant) error {
		run, err := b.variantRun(v, 1, b.opts.Workers)
		if err != nil {
			return err
		}
		if run.chain != nil {
			defer run.chain.close()
		}
		res, err := b.latencyRun(ctx, run)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		measured[v.name] = append(measured[v.name], res)
		b.progress("latency round %d/%d: %-18s p50 %6.2f ms  p99 %6.2f ms", round+1, b.opts.Rounds, v.name, millis(res.p50), millis(res.p99))
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep := &LatencyReport{Rate: b.opts.Rate, Seconds: b.opts.LatencyFor.Seconds(), WarmUpSeconds: b.opts.LatencyWarmUp.Seconds()}
	for _, v := range variants {
		rep.Pipelines = append(rep.Pipelines, summarizeLatency(v.name, measured[v.name]))
	}
	rep.ratios()
	return rep, nil
}

// latencyRun starts the processes of run, offers requests at the rate for
// the warm-up and the measured time, and returns the percentiles of the time
// from each publish of the measured part until the bench saw its result.
func (b *Bench) latencyRun(ctx context.Context, run runSpec) (res latencyResult, err error) {
	pipe := run.pipe
	if err := b.reset(ctx, pipe, run.maxAckPending); err != nil {
		return res, err
	}
	if err := b.broker.resume(ctx, pipe.stream, pipe.consumer); err != nil {
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
	warm := int(b.opts.LatencyWarmUp.Seconds() * float64(b.opts.Rate))
	n := warm + int(b.opts.LatencyFor.Seconds()*float64(b.opts.Rate))
	tag := b.tag()
	w, err := b.watchResults(ctx, pipe, tag, n)
	if err != nil {
		return res, err
	}
	defer w.stop()
	published, err := b.offer(ctx, pipe.subject, tag, n, ps)
	if err != nil {
		return res, err
	}
	w.restartClock()
	if err := w.wait(ctx, b.opts.Stall, ps); err != nil {
		return res, err
	}
	seen, _, _, _ := w.results()
	lat := make([]time.Duration, 0, n-warm)
	for i := warm; i < n; i++ {
		lat = append(lat, seen[i].Sub(published[i]))
	}
	slices.Sort(lat)
	return latencyResult{p50: percentile.Of(lat, 50), p99: percentile.Of(lat, 99), n: len(lat)}, nil
}

// offer publishes n requests at the configured rate, without waiting for
// their PubAcks in between, and returns when each was published. It stops
// if a process of ps exits.
func (b *Bench) offer(ctx context.Context, subject, tag string, n int, ps []*proc) ([]time.Time, error) {
	pacer := wait.NewPacer(float64(b.opts.Rate))
	published := make([]time.Time, n)
	futures := make([]jetstream.PubAckFuture, 0, n)
	for i := range n {
		if err := pacer.Wait(ctx); err != nil {
			return nil, err
		}
		if i%b.opts.Rate == 0 {
			if err := anyExited(ps); err != nil {
				return nil, err
			}
		}
		msg := requestMsg(subject, requestID(tag, i), b.opts.RequestBytes)
		published[i] = time.Now()
		f, err := b.broker.js.PublishMsgAsync(msg, b.stallWait())
		if err != nil {
			return nil, fmt.Errorf("publishing request %d: %w", i, err)
		}
		futures = append(futures, f)
	}
	select {
	case <-b.broker.js.PublishAsyncComplete():
	case <-time.After(b.opts.Stall):
		return nil, errors.New("requests not stored in time")
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return nil, fmt.Errorf("publishing request %d: %w", i, err)
		}
	}
	return published, nil
}
