package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func TestProcessorMemoryReadsTheGoCollectorsMetrics(t *testing.T) {
	srv := httptest.NewServer(promhttp.Handler())
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	first, err := processorMemory(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	// This test's own goroutines have stacks: the gauge cannot be zero,
	// and a process this small holds far less than a gibibyte of them.
	if first.stacks <= 0 || first.stacks > 1<<30 {
		t.Fatalf("stacks = %d bytes", first.stacks)
	}
	garbage := make([][]byte, 0, 64)
	for range 64 {
		garbage = append(garbage, make([]byte, 64<<10))
	}
	second, err := processorMemory(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if grew := second.allocated - first.allocated; grew < int64(len(garbage))*64<<10 {
		t.Fatalf("allocated %d bytes more after allocating 4 MiB", grew)
	}
}

func TestProcessorMemoryRefusesMetricsWithoutItsFigures(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"no stacks":    func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "go_memstats_alloc_bytes_total 1") },
		"no allocated": func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "go_memstats_stack_inuse_bytes 1") },
		"not found":    http.NotFound,
		"garbage":      func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "{not metrics") },
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			if got, err := processorMemory(t.Context(), strings.TrimPrefix(srv.URL, "http://")); err == nil {
				t.Fatalf("read %+v, want an error", got)
			}
		})
	}
}
