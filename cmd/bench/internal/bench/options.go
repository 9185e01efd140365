package bench

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/samber/lo"

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

// The slow provider's answer time in the scaling runs, and the outage's
// processors and their workers.
const (
	scaleDelay    = 100 * time.Millisecond
	outageProcs   = 3
	outageWorkers = 32
)

// Scenarios lists every scenario in the order a run measures them.
var Scenarios = []string{Throughput, Latency, Scaling, Outage, Memory}

// Options configure a run; the command's flags of the same names set them.
// Default and Quick return complete ones.
type Options struct {
	URL       string // an external NATS server of the bench's own; "" starts an embedded one
	Processor string // the processor binary; "" builds ./cmd/processor of the working directory's module
	Against   string // another processor binary for the throughput scenario; "" measures none
	// BaselineCommand runs the baselines (RunBaseline, RunHTTPBaseline),
	// their flags appended. Required.
	BaselineCommand []string

	Run    []string // the scenarios to measure (Scenarios)
	Rounds int      // every figure is the median of this many rounds
	WarmUp bool     // a discarded round of the throughput pipelines first

	Requests     int // the preloaded backlog of the throughput and in-process scaling runs
	RequestBytes int // the size of each request, in bytes
	Workers      int // of the baseline and of a processor in the throughput and latency runs

	Rate          int           // requests/s offered in the latency runs
	LatencyFor    time.Duration // how long, after a warm-up of LatencyWarmUp that is not counted
	LatencyWarmUp time.Duration

	ScaleProcs   []int         // the processor counts of the scaling runs
	ScaleWorkers int           // each processor's
	ScaleFor     time.Duration // sizes a slow backlog: what the workers could answer in this time

	OutageRequests int // answered through a dead primary and a healthy backup

	MemoryInFlight int           // requests held by one processor of as many workers
	MemoryDelay    time.Duration // on a provider answering after this long

	Stall    time.Duration // a run in which no result arrives for this long fails
	Progress io.Writer     // a line per run as it ends; nil discards them
}

// Default is the full run: five rounds after a warm-up.
func Default() Options {
	return Options{
		Run:            slices.Clone(Scenarios),
		Rounds:         5,
		WarmUp:         true,
		Requests:       30_000,
		RequestBytes:   150,
		Workers:        defaults.Workers,
		Rate:           1000,
		LatencyFor:     10 * time.Second,
		LatencyWarmUp:  time.Second,
		ScaleProcs:     []int{1, 2, 4, 8},
		ScaleWorkers:   64,
		ScaleFor:       5 * time.Second,
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

// defaults holds the whole-number and duration fields of config.Settings at
// the defaults of their tags, so that the bench configures its streams and
// baseline as a processor left at its defaults.
var defaults = func() (s config.Settings) {
	v := reflect.ValueOf(&s).Elem()
	for i := range v.NumField() {
		f, tag := v.Field(i), v.Type().Field(i).Tag.Get("default")
		switch {
		case tag == "":
		case f.Type() == reflect.TypeFor[time.Duration]():
			f.SetInt(int64(lo.Must(time.ParseDuration(tag))))
		case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
			f.SetInt(lo.Must(strconv.ParseInt(tag, 10, 64)))
		}
	}
	return s
}()

// Check reports the options out of range.
func (o Options) Check() error {
	var errs []error
	for _, s := range o.Run {
		if !slices.Contains(Scenarios, s) {
			errs = append(errs, fmt.Errorf("unknown scenario %q (known: %v)", s, Scenarios))
		}
	}
	if len(o.Run) == 0 || len(o.ScaleProcs) == 0 || len(o.BaselineCommand) == 0 ||
		min(o.Rounds, o.Requests, o.Workers, o.Rate, o.ScaleWorkers, o.OutageRequests, o.MemoryInFlight,
			slices.Min(append([]int{1}, o.ScaleProcs...))) < 1 {
		errs = append(errs, errors.New("scenarios, rounds, requests, workers, the rate, processor counts and requests in flight must be at least 1"))
	}
	if o.RequestBytes < 80 {
		errs = append(errs, errors.New("request size must be at least 80 bytes"))
	}
	if min(o.LatencyFor, o.ScaleFor, o.MemoryDelay, o.Stall) <= 0 || o.LatencyWarmUp < 0 {
		errs = append(errs, errors.New("durations must be positive (the latency warm-up may be 0)"))
	}
	return errors.Join(errs...)
}
