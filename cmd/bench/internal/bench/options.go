package bench

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/detourhq/detour/config"
)

// Scenario names, in the order a run measures them.
const (
	Throughput = "throughput"
	Latency    = "latency"
	Scaling    = "scaling"
	Outage     = "outage"
	Memory     = "memory"
)

// Scenarios lists every scenario in the order a run measures them.
var Scenarios = []string{Throughput, Latency, Scaling, Outage, Memory}

// Options configure a run. Default and Quick return complete ones; the
// command changes single fields from its flags.
type Options struct {
	// URL is an external NATS server; empty starts an embedded one with a
	// temporary store on a random loopback port. The bench purges detour's
	// streams and deletes its bucket there, so it must be a server of its
	// own.
	URL string
	// Processor is the processor binary; empty builds ./cmd/processor into
	// the run's temporary directory (the working directory must be inside
	// the module).
	Processor string
	// Against is another processor binary, an earlier build say, that the
	// throughput scenario measures too, on the in-process provider, its
	// rounds alternating with the others; empty measures none.
	Against string
	// BaselineCommand is the command line that runs the baselines: the
	// JetStream pipeline (RunBaseline) and the memory scenario's calls by
	// net/http alone (RunHTTPBaseline); their flags are appended to it.
	// Required.
	BaselineCommand []string

	// Run names the scenarios to measure (Scenarios).
	Run []string
	// Rounds is how many times every figure is measured; the reports are
	// medians. WarmUp runs one round of the throughput pipelines first and
	// discards it.
	Rounds int
	WarmUp bool

	// Requests is the preloaded backlog of the throughput and in-process
	// scaling runs; RequestBytes the size of each JSON request.
	Requests     int
	RequestBytes int
	// Workers is the concurrency of the baseline and of a detour processor
	// in the throughput and latency runs (detour's DETOUR_WORKERS default).
	Workers int

	// Rate and LatencyFor are the offered load of the latency runs, after a
	// warm-up of LatencyWarmUp whose latencies are not counted.
	Rate          int
	LatencyFor    time.Duration
	LatencyWarmUp time.Duration

	// ScaleProcs are the processor counts of the scaling runs, each with
	// ScaleWorkers workers; ScaleDelay is the slow provider's answer time,
	// and ScaleFor sizes its backlog: what the workers could answer in that
	// time.
	ScaleProcs   []int
	ScaleWorkers int
	ScaleDelay   time.Duration
	ScaleFor     time.Duration

	// OutageProcs processors with OutageWorkers workers each answer
	// OutageRequests requests through a dead primary and a healthy backup.
	OutageProcs    int
	OutageWorkers  int
	OutageRequests int

	// MemoryInFlight requests are held by one processor, with as many
	// workers, on a provider answering after MemoryDelay.
	MemoryInFlight int
	MemoryDelay    time.Duration

	// Stall fails a run in which no result arrives for this long.
	Stall time.Duration
	// Progress receives a line per run as it ends; nil discards them.
	Progress io.Writer
}

// Default is the full run: five rounds after a warm-up.
func Default() Options {
	return Options{
		Run:            slices.Clone(Scenarios),
		Rounds:         5,
		WarmUp:         true,
		Requests:       30_000,
		RequestBytes:   150,
		Workers:        DefaultWorkers(),
		Rate:           1000,
		LatencyFor:     10 * time.Second,
		LatencyWarmUp:  time.Second,
		ScaleProcs:     []int{1, 2, 4, 8},
		ScaleWorkers:   64,
		ScaleDelay:     100 * time.Millisecond,
		ScaleFor:       5 * time.Second,
		OutageProcs:    3,
		OutageWorkers:  32,
		OutageRequests: 5000,
		MemoryInFlight: 2000,
		MemoryDelay:    2 * time.Second,
		Stall:          30 * time.Second,
	}
}

// Quick is a smoke-test preset: every scenario, one round without warm-up,
// small enough to finish in seconds. Its figures say nothing about speed.
func Quick() Options {
	o := Default()
	o.Rounds, o.WarmUp = 1, false
	o.Requests = 2000
	o.Rate, o.LatencyFor, o.LatencyWarmUp = 200, time.Second, 200*time.Millisecond
	o.ScaleProcs, o.ScaleFor = []int{1, 2}, time.Second
	o.OutageRequests = 500
	o.MemoryInFlight, o.MemoryDelay = 200, time.Second
	return o
}

// DefaultWorkers is the default of DETOUR_WORKERS, read from config.Settings
// so that the baseline follows it.
func DefaultWorkers() int {
	n, err := strconv.Atoi(settingDefault("Workers"))
	if err != nil {
		panic(fmt.Sprintf("bench: DETOUR_WORKERS default: %v", err))
	}
	return n
}

// settingDefault is the default tag of a config.Settings field.
func settingDefault(field string) string {
	f, ok := reflect.TypeFor[config.Settings]().FieldByName(field)
	if !ok {
		panic("bench: config.Settings has no field " + field)
	}
	return f.Tag.Get("default")
}

// settingDuration is the default of a duration field of config.Settings.
func settingDuration(field string) time.Duration {
	d, err := time.ParseDuration(settingDefault(field))
	if err != nil {
		panic(fmt.Sprintf("bench: default of %s: %v", field, err))
	}
	return d
}

// settingBytes is the default of a whole-number field of config.Settings.
func settingBytes(field string) int64 {
	n, err := strconv.ParseInt(settingDefault(field), 10, 64)
	if err != nil {
		panic(fmt.Sprintf("bench: default of %s: %v", field, err))
	}
	return n
}

// Check reports every option out of range.
func (o Options) Check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(o.BaselineCommand) == 0 {
		bad("no baseline command")
	}
	if len(o.Run) == 0 {
		bad("no scenario to run")
	}
	for _, s := range o.Run {
		if !slices.Contains(Scenarios, s) {
			bad("unknown scenario %q (known: %v)", s, Scenarios)
		}
	}
	positive := map[string]int{
		"rounds": o.Rounds, "requests": o.Requests, "workers": o.Workers, "rate": o.Rate,
		"scale workers": o.ScaleWorkers, "outage processors": o.OutageProcs,
		"outage workers": o.OutageWorkers, "outage requests": o.OutageRequests,
		"memory in-flight": o.MemoryInFlight,
	}
	for _, name := range slices.Sorted(maps.Keys(positive)) {
		if positive[name] < 1 {
			bad("%s must be at least 1", name)
		}
	}
	if o.RequestBytes < 80 {
		bad("request size must be at least 80 bytes")
	}
	if o.LatencyFor <= 0 || o.ScaleFor <= 0 || o.ScaleDelay <= 0 || o.MemoryDelay <= 0 || o.Stall <= 0 {
		bad("durations must be positive")
	}
	if o.LatencyWarmUp < 0 {
		bad("latency warm-up must not be negative")
	}
	if len(o.ScaleProcs) == 0 {
		bad("no processor count to scale to")
	}
	for _, n := range o.ScaleProcs {
		if n < 1 {
			bad("processor counts must be at least 1")
		}
	}
	return errors.Join(errs...)
}

// runs reports whether scenario s is selected.
func (o Options) runs(s string) bool { return slices.Contains(o.Run, s) }
