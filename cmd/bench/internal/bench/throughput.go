package bench

import (
	"context"
	"fmt"
	"slices"

	"github.com/detourhq/detour/chain/providertest"
)

// Pipeline names of the reports.
const (
	nameBaseline   = "baseline"
	nameDetourRule = "detour in-process"
	nameDetourHTTP = "detour HTTP fake"
	// nameAgainst is Options.Against's pipeline.
	nameAgainst = "-against in-process"
	// nameHTTPBaseline is the memory scenario's baseline, RunHTTPBaseline.
	nameHTTPBaseline = "net/http alone"
)

// variant is a pipeline as a throughput or latency run sees it: the baseline,
// or detour with a chain file made fresh for each run.
type variant struct {
	name   string
	pipe   pipeline
	chain  func() (*chainFile, error) // nil for the baseline
	binary string                     // a processor other than the bench's; "" for the bench's
}

var variants = []variant{
	{name: nameBaseline, pipe: baselinePipe},
	{name: nameDetourRule, pipe: detourPipe, chain: rulesChain},
	{name: nameDetourHTTP, pipe: detourPipe, chain: func() (*chainFile, error) {
		return fakeChain(providertest.OK())
	}},
}

// variantRun is a run of procs processes of v with workers each, and for
// detour a fresh chain file, whose fakes the caller closes.
func (b *Bench) variantRun(v variant, procs, workers int) (runSpec, error) {
	run := runSpec{pipe: v.pipe, procs: procs, workers: workers, maxAckPending: defaultMaxAckPending(), binary: v.binary}
	if v.chain != nil {
		c, err := v.chain()
		if err != nil {
			return run, err
		}
		run.chain = c
	}
	return run, nil
}

// rounds calls measure for every round, the variants in turn, reversing
// their order every other round so that a drift of the machine does not
// always favour the same one.
func rounds[T any](n int, items []T, measure func(round int, item T) error) error {
	for r := range n {
		order := slices.Clone(items)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, it := range order {
			if err := measure(r, it); err != nil {
				return err
			}
		}
	}
	return nil
}

// throughput measures every variant over the preloaded backlog, one process
// each, after a warm-up round that is discarded.
func (b *Bench) throughput(ctx context.Context) (*ThroughputReport, error) {
	variants := variants
	if b.opts.Against != "" {
		variants = append(slices.Clip(variants), variant{name: nameAgainst, pipe: detourPipe, chain: rulesChain, binary: b.opts.Against})
	}
	measured := map[string][]backlogResult{}
	measure := func(round int, v variant) error {
		run, err := b.variantRun(v, 1, b.opts.Workers)
		if err != nil {
			return err
		}
		if run.chain != nil {
			defer run.chain.close()
		}
		res, err := b.backlog(ctx, run, b.opts.Requests, backlogHooks{})
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		what := fmt.Sprintf("round %d/%d", round+1, b.opts.Rounds)
		if round < 0 {
			what = "warm-up"
		} else {
			measured[v.name] = append(measured[v.name], res)
		}
		b.progress("throughput %s: %-18s %8.0f req/s  %6.1f µs CPU/request", what, v.name, res.reqPerSec, micros(res.cpuPerReq))
		return nil
	}
	if b.opts.WarmUp {
		for _, v := range variants {
			if err := measure(-1, v); err != nil {
				return nil, err
			}
		}
	}
	if err := rounds(b.opts.Rounds, variants, measure); err != nil {
		return nil, err
	}
	rep := &ThroughputReport{Requests: b.opts.Requests, RequestBytes: b.opts.RequestBytes, Workers: b.opts.Workers,
		BenchCPUWithServer: b.broker.srv != nil}
	for _, v := range variants {
		rep.Pipelines = append(rep.Pipelines, summarizeBacklog(v.name, measured[v.name]))
	}
	rep.ratios()
	return rep, nil
}
