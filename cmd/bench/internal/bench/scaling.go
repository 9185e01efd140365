package bench

import (
	"context"
	"fmt"

	"github.com/detourhq/detour/chain/providertest"
)

// scaling measures each processor count over a backlog, first with the slow
// HTTP fake, then with the in-process chain.
func (b *Bench) scaling(ctx context.Context) (*ScalingReport, error) {
	slow, err := b.scaleSeries(ctx, true)
	if err != nil {
		return nil, err
	}
	inProcess, err := b.scaleSeries(ctx, false)
	if err != nil {
		return nil, err
	}
	return &ScalingReport{Slow: slow, InProcess: inProcess}, nil
}

func (b *Bench) scaleSeries(ctx context.Context, slow bool) (*ScalingSeries, error) {
	series := &ScalingSeries{Provider: "in-process", Workers: b.opts.ScaleWorkers}
	if slow {
		series.Provider = fmt.Sprintf("HTTP fake answering in %s", scaleDelay)
		series.DelayMs = millis(scaleDelay)
	}
	measured, err := rounds(b, Scaling, b.opts.ScaleProcs, func(procs int) (backlogResult, string, error) {
		run := runSpec{pipe: detourPipe, procs: procs, workers: b.opts.ScaleWorkers,
			maxAckPending: max(defaults.MaxAckPending, 2*procs*b.opts.ScaleWorkers), chain: rulesChain()}
		n := b.opts.Requests
		if slow {
			run.chain = fakeChain(providertest.Slow(scaleDelay, providertest.OK()))
			// What the workers could answer in ScaleFor.
			n = int(float64(procs*b.opts.ScaleWorkers) * b.opts.ScaleFor.Seconds() / scaleDelay.Seconds())
		}
		defer run.chain.close()
		res, err := b.backlog(ctx, run, n, nil)
		if err != nil {
			return res, "", fmt.Errorf("%d processors, %s: %w", procs, series.Provider, err)
		}
		return res, fmt.Sprintf("%s, processors: %d: %8.0f req/s", series.Provider, procs, res.reqPerSec), nil
	})
	if err != nil {
		return nil, err
	}
	// ScaleProcs are sorted: the first point is one processor's, if any.
	for i, procs := range b.opts.ScaleProcs {
		fig := summarizeBacklog("", measured[i])
		p := ScalingPoint{Processors: procs, Requests: measured[i][0].requests, ReqPerSec: fig.ReqPerSec,
			CPUPerReqUs: fig.CPUPerReqUs, RoundsReqPerSec: fig.RoundsReqPerSec, VsOne: 1}
		if i > 0 {
			p.VsOne = ratio(p.ReqPerSec, series.Points[0].ReqPerSec)
			p.VsPrevious = ratio(p.ReqPerSec, series.Points[i-1].ReqPerSec)
		}
		if slow {
			p.Allowed = float64(procs*b.opts.ScaleWorkers) / scaleDelay.Seconds()
			p.ShareOfAllowed = p.ReqPerSec / p.Allowed
		}
		series.Points = append(series.Points, p)
	}
	return series, nil
}
