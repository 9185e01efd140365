package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/detourhq/detour/chain/providertest"
)

// memorySettle is how long an idle processor runs before its resident set
// is read as the idle one.
const memorySettle = time.Second

// memoryResult is what one memory run measured.
type memoryResult struct {
	idle, peak  int64 // bytes
	peakFromHWM bool  // VmHWM after a reset; else the highest VmRSS sampled
	inFlight    int   // most calls the slow provider held at once
	// waiting and answered are as MemoryReport reads them; zero for the
	// HTTP baseline, and waiting when the provider never held every call.
	waiting, answered goMemory
}

// kibPerRequest is the growth from idle to peak, per call the provider held
// at once.
func (r memoryResult) kibPerRequest() float64 {
	return float64(r.peak-r.idle) / 1024 / float64(r.inFlight)
}

// memory runs the memory scenario once a round, and the HTTP baseline
// (RunHTTPBaseline) beside it.
func (b *Bench) memory(ctx context.Context) (*MemoryReport, error) {
	measured, err := rounds(b, Memory, []string{nameDetourHTTP, nameHTTPBaseline}, func(name string) (memoryResult, string, error) {
		run := b.memoryRun
		if name == nameHTTPBaseline {
			run = b.httpBaselineRun
		}
		res, err := run(ctx)
		if err != nil {
			return res, "", fmt.Errorf("%s: %w", name, err)
		}
		return res, fmt.Sprintf("%-18s idle %.1f MiB, peak %.1f MiB with %d in flight: %.1f KiB a request",
			name, mib(res.idle), mib(res.peak), res.inFlight, res.kibPerRequest()), nil
	})
	if err != nil {
		return nil, err
	}
	return summarizeMemory(b.opts, measured[0], measured[1]), nil
}

// memoryRun holds MemoryInFlight requests in one processor with as many
// workers, on a provider that answers after MemoryDelay, and compares its
// peak resident set with its idle one.
func (b *Bench) memoryRun(ctx context.Context) (res memoryResult, err error) {
	c := fakeChain(providertest.Slow(b.opts.MemoryDelay, providertest.OK()))
	defer c.close()
	n := b.opts.MemoryInFlight
	run := runSpec{pipe: detourPipe, procs: 1, workers: n, maxAckPending: max(defaults.MaxAckPending, 2*n), chain: c}
	if err := b.broker.reset(ctx, run.pipe, run.maxAckPending, false); err != nil {
		return res, err
	}
	ps, err := b.start(ctx, run)
	if err != nil {
		return res, err
	}
	defer func() { err = cmp.Or(err, stopProcs(ps)) }()
	pid := ps[0].cmd.Process.Pid
	if res.idle, res.peakFromHWM, err = idleMemory(ctx, pid); err != nil {
		return res, err
	}
	res.peak = res.idle // the peak window starts at the idle reading
	w, err := b.watchResults(ctx, run.pipe, n)
	if err != nil {
		return res, err
	}
	defer w.cc.Stop()
	if _, err := b.publish(ctx, w, 0, nil); err != nil {
		return res, err
	}
	waited, done := make(chan error, 1), make(chan struct{})
	go func() { waited <- w.wait(ctx, b.opts.Stall, ps); close(done) }()
	err = sample(ctx, done, func() (err error) {
		res.inFlight = max(res.inFlight, c.fakes[0].InFlight())
		if res.peak, err = samplePeak(pid, res.peakFromHWM, res.peak); err == nil && res.inFlight == n && res.waiting.stacks == 0 {
			res.waiting, err = processorMemory(ctx, ps[0].metrics)
		}
		return err
	})
	if err != nil {
		return res, err
	}
	if err := <-waited; err != nil {
		return res, err
	}
	if res.inFlight == 0 {
		return res, errors.New("the slow provider never held a request")
	}
	res.answered, err = processorMemory(ctx, ps[0].metrics)
	return res, err
}

// sample calls f every 10 ms until done is closed, and once more then; it
// stops early when f fails or ctx ends.
func sample(ctx context.Context, done <-chan struct{}, f func() error) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ended := false
		select {
		case <-done:
			ended = true
		case <-tick.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if err := f(); err != nil || ended {
			return err
		}
	}
}

// goMemory is what the memory scenario reads of a processor from the Go
// collector's metrics on its /metrics: the bytes of goroutine stacks in use
// (runtime.MemStats.StackInuse), and the bytes allocated on the heap since
// it started (runtime.MemStats.TotalAlloc).
type goMemory struct {
	stacks, allocated int64
}

// processorMemory reads goMemory from the processor serving its metrics on
// addr (host:port).
func processorMemory(ctx context.Context, addr string) (m goMemory, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil) // a valid URL
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return m, fmt.Errorf("reading the processor's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("reading the processor's metrics: status %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return m, fmt.Errorf("reading the processor's metrics: %w", err)
	}
	for name, into := range map[string]*int64{"go_memstats_stack_inuse_bytes": &m.stacks, "go_memstats_alloc_bytes_total": &m.allocated} {
		f, ok := families[name]
		if !ok || len(f.GetMetric()) == 0 {
			return m, fmt.Errorf("the processor's metrics have no %s", name)
		}
		// A gauge, or a counter: the other is nil and reads 0.
		metric := f.GetMetric()[0]
		*into = int64(metric.GetGauge().GetValue() + metric.GetCounter().GetValue())
	}
	return m, nil
}
