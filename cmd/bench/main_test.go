package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/detourhq/detour/cmd/bench/internal/bench"
)

// TestMain lets the test binary stand in for the bench binary: the bench
// starts its baseline as "<its own executable> baseline …".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "baseline" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// The quick preset runs every scenario end to end, the processor built from
// this module, and reports positive figures for each. No figure is held to a
// target: the machine running the tests decides those.
func TestQuickRunReportsEveryScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the processor and runs every scenario: about half a minute")
	}
	jsonFile := filepath.Join(t.TempDir(), "bench.json")
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"-quick", "-json", jsonFile}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d\nstderr:\n%s\nstdout:\n%s", code, stderr.String(), stdout.String())
	}
	data, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var r bench.Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	positive := func(what string, v float64) {
		t.Helper()
		if !(v > 0) {
			t.Errorf("%s = %v, want > 0", what, v)
		}
	}
	positive("machine cpus", float64(r.Machine.CPUs))
	if r.Throughput == nil || len(r.Throughput.Pipelines) != 3 {
		t.Fatalf("throughput: %+v", r.Throughput)
	}
	for _, p := range r.Throughput.Pipelines {
		positive(p.Name+" req/s", p.ReqPerSec)
		positive(p.Name+" CPU per request", p.CPUPerReqUs)
		positive(p.Name+" result bytes", p.ResultBytes)
		positive(p.Name+" bench CPU per request (embedded server)", p.BenchCPUPerReqUs)
	}
	if r.Latency == nil || len(r.Latency.Pipelines) != 3 {
		t.Fatalf("latency: %+v", r.Latency)
	}
	for _, p := range r.Latency.Pipelines {
		positive(p.Name+" p50", p.P50Ms)
		positive(p.Name+" p99", p.P99Ms)
	}
	if r.Scaling == nil || r.Scaling.Slow == nil || r.Scaling.InProcess == nil {
		t.Fatalf("scaling: %+v", r.Scaling)
	}
	for _, s := range []*bench.ScalingSeries{r.Scaling.Slow, r.Scaling.InProcess} {
		if len(s.Points) != 2 {
			t.Errorf("%s: %d points, want 2", s.Provider, len(s.Points))
		}
		for _, p := range s.Points {
			positive(s.Provider+" req/s", p.ReqPerSec)
		}
	}
	if r.Outage == nil {
		t.Fatal("no outage")
	}
	positive("outage calls", r.Outage.Calls)
	positive("outage failure_threshold", float64(r.Outage.FailureThreshold))
	if r.Memory == nil {
		t.Fatal("no memory")
	}
	positive("idle RSS", r.Memory.IdleRSSKiB)
	positive("KiB per request", r.Memory.KiBPerRequest)
	positive("net/http alone: idle RSS", r.Memory.Baseline.IdleRSSKiB)
	positive("net/http alone: KiB per call", r.Memory.Baseline.KiBPerRequest)
	positive("net/http alone: calls in flight", float64(r.Memory.Baseline.PeakInFlight))
	positive("goroutine stacks, answers stored", r.Memory.StacksAnsweredKiB)
	if r.Memory.PeakInFlight == r.Memory.InFlight {
		// Read only once the provider holds every call, as it did here.
		positive("goroutine stacks, calls waiting", r.Memory.StacksWaitingKiB)
		positive("allocated per answer", r.Memory.AllocatedPerAnswerKiB)
	}
	if !strings.Contains(stdout.String(), "net/http alone") {
		t.Error("the memory table has no net/http column")
	}
	if len(r.Errors) > 0 || len(r.Targets) == 0 {
		t.Errorf("errors %v, %d targets", r.Errors, len(r.Targets))
	}
	for _, section := range []string{"THROUGHPUT", "LATENCY", "SCALING", "OUTAGE", "MEMORY", "machine:"} {
		if !strings.Contains(stdout.String(), section) {
			t.Errorf("the table has no %s", section)
		}
	}
}

// TestAgainstMeasuresAnotherBinary: -against adds a pipeline of that
// processor binary to the throughput scenario, beside the bench's own.
func TestAgainstMeasuresAnotherBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the processor and runs the throughput scenario")
	}
	dir := t.TempDir()
	proc := filepath.Join(dir, "processor")
	if out, err := exec.Command("go", "build", "-o", proc, "../processor").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	jsonFile := filepath.Join(dir, "bench.json")
	var stdout, stderr bytes.Buffer
	args := []string{"-quick", "-run", "throughput", "-processor", proc, "-against", proc, "-json", jsonFile}
	if code := run(t.Context(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d\nstderr:\n%s", code, stderr.String())
	}
	data, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var r bench.Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Throughput == nil || len(r.Throughput.Pipelines) != 4 {
		t.Fatalf("throughput: %+v", r.Throughput)
	}
	against := r.Throughput.Pipelines[3]
	if against.Name != "-against in-process" || !(against.ReqPerSec > 0) || !(against.ThroughputRatio > 0) {
		t.Errorf("the -against pipeline: %+v", against)
	}
}

// The hidden baseline command runs one of its two baselines, and refuses
// flags that mix them or leave one without what it needs.
func TestBaselineCommandRefusesMixedOrMissingFlags(t *testing.T) {
	for _, args := range [][]string{
		{"baseline"},
		{"baseline", "-http", "http://127.0.0.1:1/chat/completions"},
		{"baseline", "-http", "http://127.0.0.1:1/chat/completions", "-calls", "3", "-workers", "2"},
		{"baseline", "-url", "nats://127.0.0.1:1", "-calls", "3"},
		{"baseline", "-url", "nats://127.0.0.1:1", "-http", "http://127.0.0.1:1/chat/completions", "-calls", "3"},
		{"baseline", "-url", "nats://127.0.0.1:1", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "usage: bench baseline") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and the usage", args, code, stderr.String())
		}
	}
}
