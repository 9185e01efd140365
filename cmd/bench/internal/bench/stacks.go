package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The Go collector's metrics that a processor serves on its /metrics and
// the memory scenario reads: the bytes of goroutine stacks in use
// (runtime.MemStats.StackInuse), and the bytes allocated on the heap since
// the process started (runtime.MemStats.TotalAlloc).
const (
	stackMetric = "go_memstats_stack_inuse_bytes"
	allocMetric = "go_memstats_alloc_bytes_total"
)

// goMemory is what processorMemory read: bytes of goroutine stacks in
// use, and bytes allocated so far.
type goMemory struct {
	stacks, allocated int64
}

// processorMemory reads stackMetric and allocMetric from the processor
// serving its metrics on addr (host:port).
func processorMemory(ctx context.Context, addr string) (goMemory, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var m goMemory
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return m, err
	}
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
	for name, into := range map[string]*int64{stackMetric: &m.stacks, allocMetric: &m.allocated} {
		f, ok := families[name]
		if !ok || len(f.GetMetric()) == 0 {
			return m, fmt.Errorf("the processor's metrics have no %s", name)
		}
		metric := f.GetMetric()[0]
		if g := metric.GetGauge(); g != nil {
			*into = int64(g.GetValue())
		} else {
			*into = int64(metric.GetCounter().GetValue())
		}
	}
	return m, nil
}
