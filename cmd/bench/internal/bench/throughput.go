package bench

import (
	"context"
	"fmt"
	"slices"

	"github.com/detourhq/detour/chain/providertest"
)

// Pipeline names of the reports.
const (
	nameBaseline     = "baseline"
	nameDetourRule   = "detour in-process"
	nameDetourHTTP   = "detour HTTP fake"
	nameAgainst      = "-against in-process" // Options.Against's
	nameHTTPBaseline = "net/http alone"      // the memory scenario's baseline
)

// variant is a pipeline of the throughput and latency runs: the baseline,
// or detour with a chain file made fresh for each run.
type variant struct {
	name   string
	pipe   pipeline
	chain  func() *chainFile // nil for the baseline
	binary string            // a processor other than the bench's; "" for the bench's
}

var variants = []variant{
	{name: nameBaseline, pipe: baselinePipe},
	{name: nameDetourRule, pipe: detourPipe, chain: rulesChain},
	{name: nameDetourHTTP, pipe: detourPipe, chain: func() *chainFile { return fakeChain(providertest.OK()) }},
}

// eachVariant measures one process of every variant in each round, after a
// discarded round of them when warmUp, and returns the results as rounds
// does. measure also returns the figures of its progress line.
func eachVariant[T any](b *Bench, scenario string, vs []variant, warmUp bool, measure func(runSpec) (T, string, error)) ([][]T, error) {
	one := func(v variant) (res T, line string, err error) {
		run := runSpec{pipe: v.pipe, procs: 1, workers: b.opts.Workers, maxAckPending: defaults.MaxAckPending, binary: v.binary}
		if v.chain != nil {
			run.chain = v.chain()
			defer run.chain.close()
		}
		if res, line, err = measure(run); err != nil {
			return res, "", fmt.Errorf("%s: %w", v.name, err)
		}
		return res, fmt.Sprintf("%-18s %s", v.name, line), nil
	}
	for i := 0; warmUp && i < len(vs); i++ {
		_, line, err := one(vs[i])
		if err != nil {
			return nil, err
		}
		b.progress("%s warm-up: %s", scenario, line)
	}
	return rounds(b, scenario, vs, one)
}

// throughput measures every variant over the preloaded backlog.
func (b *Bench) throughput(ctx context.Context) (*ThroughputReport, error) {
	vs := variants
	if b.opts.Against != "" {
		vs = append(slices.Clip(vs), variant{name: nameAgainst, pipe: detourPipe, chain: rulesChain, binary: b.opts.Against})
	}
	measured, err := eachVariant(b, Throughput, vs, b.opts.WarmUp, func(run runSpec) (backlogResult, string, error) {
		res, err := b.backlog(ctx, run, b.opts.Requests, nil)
		return res, fmt.Sprintf("%8.0f req/s  %6.1f µs CPU/request", res.reqPerSec, micros(res.cpuPerReq)), err
	})
	if err != nil {
		return nil, err
	}
	rep := &ThroughputReport{Requests: b.opts.Requests, RequestBytes: b.opts.RequestBytes, Workers: b.opts.Workers,
		BenchCPUWithServer: b.broker.srv != nil}
	for i, v := range vs {
		p := summarizeBacklog(v.name, measured[i])
		if len(rep.Pipelines) > 0 {
			base := rep.Pipelines[0]
			p.ThroughputRatio, p.CPURatio = ratio(p.ReqPerSec, base.ReqPerSec), ratio(p.CPUPerReqUs, base.CPUPerReqUs)
		}
		rep.Pipelines = append(rep.Pipelines, p)
	}
	return rep, nil
}
