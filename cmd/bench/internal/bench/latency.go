package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/detourhq/detour/internal/percentile"
)

// latencyResult is what one run at the offered rate measured.
type latencyResult struct {
	p50, p99 time.Duration
	n        int
}

// latency measures every variant at the offered rate.
func (b *Bench) latency(ctx context.Context) (*LatencyReport, error) {
	measured, err := eachVariant(b, Latency, variants, false, func(run runSpec) (latencyResult, string, error) {
		res, err := b.latencyRun(ctx, run)
		return res, fmt.Sprintf("p50 %6.2f ms  p99 %6.2f ms", millis(res.p50), millis(res.p99)), err
	})
	if err != nil {
		return nil, err
	}
	rep := &LatencyReport{Rate: b.opts.Rate, Seconds: b.opts.LatencyFor.Seconds(), WarmUpSeconds: b.opts.LatencyWarmUp.Seconds()}
	for i, v := range variants {
		rs := measured[i]
		p := PipelineLatency{Name: v.name, Requests: rs[0].n,
			RoundsP50Ms: each(rs, func(r latencyResult) float64 { return millis(r.p50) }),
			RoundsP99Ms: each(rs, func(r latencyResult) float64 { return millis(r.p99) })}
		p.P50Ms, p.P99Ms = median(p.RoundsP50Ms), median(p.RoundsP99Ms)
		if len(rep.Pipelines) > 0 {
			base := rep.Pipelines[0]
			p.P50Ratio, p.P99Ratio = ratio(p.P50Ms, base.P50Ms), ratio(p.P99Ms, base.P99Ms)
		}
		rep.Pipelines = append(rep.Pipelines, p)
	}
	return rep, nil
}

// latencyRun starts the processes of run, offers requests at the rate for
// the warm-up and the measured time, and returns the percentiles of the time
// from each publish of the measured part until the bench saw its result.
func (b *Bench) latencyRun(ctx context.Context, run runSpec) (res latencyResult, err error) {
	if err := b.broker.reset(ctx, run.pipe, run.maxAckPending, false); err != nil {
		return res, err
	}
	ps, err := b.start(ctx, run)
	if err != nil {
		return res, err
	}
	defer func() { err = cmp.Or(err, stopProcs(ps)) }()
	warm := int(b.opts.LatencyWarmUp.Seconds() * float64(b.opts.Rate))
	n := warm + int(b.opts.LatencyFor.Seconds()*float64(b.opts.Rate))
	w, err := b.watchResults(ctx, run.pipe, n)
	if err != nil {
		return res, err
	}
	defer w.cc.Stop()
	published, err := b.publish(ctx, w, b.opts.Rate, ps)
	if err != nil {
		return res, err
	}
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
