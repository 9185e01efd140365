package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

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
