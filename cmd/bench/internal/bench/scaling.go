package bench

import (
	"context"
	"fmt"

	"github.com/detourhq/detour/chain/providertest"
)

// scaling measures 1, 2, 4… processors over a backlog, first with the slow
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
		series.Provider = fmt.Sprintf("HTTP fake answering in %s", b.opts.ScaleDelay)
		series.DelayMs = millis(b.opts.ScaleDelay)
	}
	measured := map[int][]backlogResult{}
	err := rounds(b.opts.Rounds, b.opts.ScaleProcs, func(round, procs int) error {
		run := runSpec{pipe: detourPipe, procs: procs, workers: b.opts.ScaleWorkers, maxAckPending: defaultMaxAckPending()}
		var err error
		n := b.opts.Requests
		if slow {
			run.chain, err = fakeChain(providertest.Slow(b.opts.ScaleDelay, providertest.OK()))
			// What the workers could answer in ScaleFor.
			n = int(float64(procs*b.opts.ScaleWorkers) * b.opts.ScaleFor.Seconds() / b.opts.ScaleDelay.Seconds())
		} else {
			run.chain, err = rulesChain()
		}
		if err != nil {
			return err
		}
		defer run.chain.close()
		run.maxAckPending = max(run.maxAckPending, 2*procs*b.opts.ScaleWorkers)
		res, err := b.backlog(ctx, run, n, backlogHooks{})
		if err != nil {
			return fmt.Errorf("%d processors, %s: %w", procs, series.Provider, err)
		}
		measured[procs] = append(measured[procs], res)
		b.progress("scaling round %d/%d: %s, processors: %d: %8.0f req/s", round+1, b.opts.Rounds, series.Provider, procs, res.reqPerSec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, procs := range b.opts.ScaleProcs {
		fig := summarizeBacklog(fmt.Sprintf("%d", procs), measured[procs])
		point := ScalingPoint{Processors: procs, Requests: measured[procs][0].requests, ReqPerSec: fig.ReqPerSec,
			CPUPerReqUs: fig.CPUPerReqUs, RoundsReqPerSec: fig.RoundsReqPerSec}
		if slow {
			point.Allowed = float64(procs*b.opts.ScaleWorkers) / b.opts.ScaleDelay.Seconds()
			point.ShareOfAllowed = point.ReqPerSec / point.Allowed
		}
		series.Points = append(series.Points, point)
	}
	series.ratios()
	return series, nil
}
