package bench

import (
	"cmp"
	"runtime"
	"slices"
	"time"

	"github.com/samber/lo"
)

// Report is what a run measured: the medians of its rounds, each round's
// figures, and the performance targets with whether each holds. It is the
// JSON of -json; WriteTable prints it. Times are in the unit their name
// ends in (Us µs, Ms ms), sizes in bytes or KiB.
type Report struct {
	Machine    Machine           `json:"machine"`
	Server     string            `json:"server"`
	Processor  string            `json:"processor"`
	Rounds     int               `json:"rounds"`
	WarmUp     bool              `json:"warm_up"`
	Throughput *ThroughputReport `json:"throughput,omitempty"`
	Latency    *LatencyReport    `json:"latency,omitempty"`
	Scaling    *ScalingReport    `json:"scaling,omitempty"`
	Outage     *OutageReport     `json:"outage,omitempty"`
	Memory     *MemoryReport     `json:"memory,omitempty"`
	Targets    []Target          `json:"targets"`
	Errors     map[string]string `json:"errors,omitempty"` // why each scenario that failed did
}

// Machine is where the run ran. LoadStart and LoadEnd are the one-minute
// load average when the run began and ended (-1: unknown): much more than
// the CPU count means other work shared the machine and skewed the figures.
type Machine struct {
	CPUs       int     `json:"cpus"`
	GOMAXPROCS int     `json:"gomaxprocs"`
	CPUModel   string  `json:"cpu_model"`
	OS         string  `json:"os"`
	Arch       string  `json:"arch"`
	Go         string  `json:"go"`
	LoadStart  float64 `json:"load_start"`
	LoadEnd    float64 `json:"load_end"`
}

// ThroughputReport compares the pipelines over a preloaded backlog: the
// baseline first, then detour's with their ratios to it. BenchCPUWithServer
// says the server was embedded, so that BenchCPUPerReqUs include its work.
type ThroughputReport struct {
	Requests           int                  `json:"requests"`
	RequestBytes       int                  `json:"request_bytes"`
	Workers            int                  `json:"workers"`
	BenchCPUWithServer bool                 `json:"bench_cpu_with_server"`
	Pipelines          []PipelineThroughput `json:"pipelines"`
}

// PipelineThroughput is one pipeline's medians and rounds. CPUFromProc is
// false when /proc could not be read and the CPU time is each process's
// whole life from its rusage. BenchCPUPerReqUs is the bench process's own
// CPU over the same window (reading results back, serving the HTTP fake,
// and the embedded server's work); zero where /proc cannot be read.
type PipelineThroughput struct {
	Name                   string    `json:"name"`
	ReqPerSec              float64   `json:"req_per_s"`
	CPUPerReqUs            float64   `json:"cpu_per_request_us"`
	CPUFromProc            bool      `json:"cpu_from_proc"`
	BenchCPUPerReqUs       float64   `json:"bench_cpu_per_request_us,omitempty"`
	RoundsBenchCPUPerReqUs []float64 `json:"rounds_bench_cpu_per_request_us,omitempty"`
	ResultBytes            float64   `json:"result_bytes"`
	NotOK                  int       `json:"not_ok"`
	ThroughputRatio        float64   `json:"throughput_ratio,omitempty"`
	CPURatio               float64   `json:"cpu_ratio,omitempty"`
	RoundsReqPerSec        []float64 `json:"rounds_req_per_s"`
	RoundsCPUPerReqUs      []float64 `json:"rounds_cpu_per_request_us"`
}

// LatencyReport compares the pipelines' end-to-end latency at a fixed rate.
type LatencyReport struct {
	Rate          int               `json:"rate"`
	Seconds       float64           `json:"seconds"`
	WarmUpSeconds float64           `json:"warm_up_seconds"`
	Pipelines     []PipelineLatency `json:"pipelines"`
}

// PipelineLatency is one pipeline's median percentiles and rounds.
type PipelineLatency struct {
	Name        string    `json:"name"`
	Requests    int       `json:"requests"`
	P50Ms       float64   `json:"p50_ms"`
	P99Ms       float64   `json:"p99_ms"`
	P50Ratio    float64   `json:"p50_ratio,omitempty"`
	P99Ratio    float64   `json:"p99_ratio,omitempty"`
	RoundsP50Ms []float64 `json:"rounds_p50_ms"`
	RoundsP99Ms []float64 `json:"rounds_p99_ms"`
}

// ScalingReport is throughput by processor count, with the slow HTTP
// provider and with the in-process chain.
type ScalingReport struct {
	Slow      *ScalingSeries `json:"slow"`
	InProcess *ScalingSeries `json:"in_process"`
}

// ScalingSeries is one provider's points, fewest processors first.
type ScalingSeries struct {
	Provider string         `json:"provider"`
	DelayMs  float64        `json:"delay_ms,omitempty"`
	Workers  int            `json:"workers"`
	Points   []ScalingPoint `json:"points"`
}

// ScalingPoint is one processor count's medians. VsOne is ReqPerSec over
// the first point's (one processor's), VsPrevious over the point before's.
// Allowed is what the workers allow with the slow provider, processors ×
// workers / delay, and ShareOfAllowed the share reached.
type ScalingPoint struct {
	Processors      int       `json:"processors"`
	Requests        int       `json:"requests"`
	ReqPerSec       float64   `json:"req_per_s"`
	CPUPerReqUs     float64   `json:"cpu_per_request_us"`
	VsOne           float64   `json:"vs_one"`
	VsPrevious      float64   `json:"vs_previous,omitempty"`
	Allowed         float64   `json:"allowed_req_per_s,omitempty"`
	ShareOfAllowed  float64   `json:"share_of_allowed,omitempty"`
	RoundsReqPerSec []float64 `json:"rounds_req_per_s"`
}

// OutageReport is what a dead primary cost, as medians of the rounds (see
// OutageRounds). ExcessCalls is, in each round, the calls beyond
// failure_threshold plus the requests in flight at the cooldown (the target
// allows none); the Worst fields are the worst round's.
type OutageReport struct {
	Processors               int            `json:"processors"`
	Workers                  int            `json:"workers"`
	Requests                 int            `json:"requests"`
	FailureThreshold         int            `json:"failure_threshold"`
	MaxRetries               int            `json:"max_retries"`
	Calls                    float64        `json:"calls"`
	CallsBeforeOpen          float64        `json:"calls_before_open"`
	ProviderInFlightAtOpen   float64        `json:"provider_in_flight_at_open"`
	RequestsInFlightAtOpen   float64        `json:"requests_in_flight_at_open"`
	LastCallAfterOpenMs      float64        `json:"last_call_after_open_ms"`
	ExcessCalls              float64        `json:"excess_calls"`
	WorstExcessCalls         int            `json:"worst_excess_calls"`
	WorstLastCallAfterOpenMs float64        `json:"worst_last_call_after_open_ms"`
	Rounds                   []OutageRounds `json:"rounds"`
}

// OutageRounds is one outage round: the calls the dead provider received,
// of them before the cooldown key was created; its calls in progress when
// the bench saw the key; the requests in flight when the key was created
// (their chain had begun, by their result's store time less its latency_ms,
// and their result was not stored yet); and the time from the key's
// creation to the dead provider's last call, negative when none came after.
type OutageRounds struct {
	Calls                  int     `json:"calls"`
	CallsBeforeOpen        int     `json:"calls_before_open"`
	ProviderInFlightAtOpen int     `json:"provider_in_flight_at_open"`
	RequestsInFlightAtOpen int     `json:"requests_in_flight_at_open"`
	LastCallAfterOpenMs    float64 `json:"last_call_after_open_ms"`
}

// MemoryReport is the resident set a processor needs per request in flight,
// beside Baseline: net/http alone holding as many calls to the same
// provider with the client detour's providers use (RunHTTPBaseline).
// AboveBaselineKiB is the median over rounds of KiBPerRequest less the
// baseline's in the same round. StacksWaitingKiB and StacksAnsweredKiB are
// the processor's goroutine stacks (go_memstats_stack_inuse_bytes) when the
// provider first holds every call and once every answer is stored;
// AllocatedPerAnswerKiB is what its heap allocated in between
// (go_memstats_alloc_bytes_total) per call. The first reading and the
// allocation count only rounds whose provider held every call, zero when
// none did.
type MemoryReport struct {
	Workers  int     `json:"workers"`
	DelayMs  float64 `json:"delay_ms"`
	InFlight int     `json:"in_flight"`
	MemoryFigures
	Baseline              MemoryFigures `json:"baseline"`
	AboveBaselineKiB      float64       `json:"above_baseline_kib"`
	StacksWaitingKiB      float64       `json:"stacks_waiting_kib"`
	StacksAnsweredKiB     float64       `json:"stacks_answered_kib"`
	AllocatedPerAnswerKiB float64       `json:"allocated_per_answer_kib"`
}

// MemoryFigures are one process's medians over the rounds. PeakInFlight is
// the most calls the provider held at once; the cost per request is divided
// by it.
type MemoryFigures struct {
	PeakInFlight  int       `json:"peak_in_flight"`
	IdleRSSKiB    float64   `json:"idle_rss_kib"`
	PeakRSSKiB    float64   `json:"peak_rss_kib"`
	PeakFromHWM   bool      `json:"peak_from_vmhwm"`
	KiBPerRequest float64   `json:"kib_per_request"`
	RoundsKiB     []float64 `json:"rounds_kib_per_request"`
}

// Target is one of the performance targets (BENCHMARKS.md) and whether the
// run meets it; Holds is nil when the run did not measure it.
type Target struct {
	ID       int    `json:"id"`
	Scenario string `json:"scenario"`
	Text     string `json:"text"`
	Measured string `json:"measured"`
	Holds    *bool  `json:"holds"`
}

func (b *Bench) newReport() *Report {
	server := "embedded nats-server " + b.broker.nc.ConnectedServerVersion()
	if b.opts.URL != "" {
		server = b.opts.URL + " (nats-server " + b.broker.nc.ConnectedServerVersion() + ")"
	}
	return &Report{
		Machine: Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), CPUModel: cpuModel(),
			OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version(), LoadStart: loadAverage()},
		Server: server, Processor: cmp.Or(b.opts.Processor, "built from ./cmd/processor"),
		Rounds: b.opts.Rounds, WarmUp: b.opts.WarmUp, Errors: map[string]string{},
	}
}

// each is f of every one of rs.
func each[T any](rs []T, f func(T) float64) []float64 {
	return lo.Map(rs, func(r T, _ int) float64 { return f(r) })
}

func summarizeBacklog(name string, rs []backlogResult) PipelineThroughput {
	p := PipelineThroughput{Name: name, CPUFromProc: true,
		RoundsReqPerSec:   each(rs, func(r backlogResult) float64 { return r.reqPerSec }),
		RoundsCPUPerReqUs: each(rs, func(r backlogResult) float64 { return micros(r.cpuPerReq) }),
	}
	for _, r := range rs {
		p.ResultBytes += r.resultBytes / float64(len(rs))
		p.CPUFromProc = p.CPUFromProc && r.cpuLive
		if r.benchCPUPerReq > 0 {
			p.RoundsBenchCPUPerReqUs = append(p.RoundsBenchCPUPerReqUs, micros(r.benchCPUPerReq))
		}
		p.NotOK += r.notOK
	}
	p.ReqPerSec, p.CPUPerReqUs = median(p.RoundsReqPerSec), median(p.RoundsCPUPerReqUs)
	if len(p.RoundsBenchCPUPerReqUs) == len(rs) {
		p.BenchCPUPerReqUs = median(p.RoundsBenchCPUPerReqUs)
	} else {
		p.RoundsBenchCPUPerReqUs = nil
	}
	return p
}

func summarizeOutage(o Options, rs []OutageRounds) *OutageReport {
	rep := &OutageReport{Processors: outageProcs, Workers: outageWorkers, Requests: o.OutageRequests,
		FailureThreshold: fakeFailureThreshold, MaxRetries: fakeMaxRetries, Rounds: rs}
	// Judged round by round: the medians of calls and of requests in flight
	// taken apart could pair figures of different rounds.
	excess := each(rs, func(r OutageRounds) float64 {
		return float64(r.Calls - fakeFailureThreshold - r.RequestsInFlightAtOpen)
	})
	last := each(rs, func(r OutageRounds) float64 { return r.LastCallAfterOpenMs })
	rep.ExcessCalls, rep.WorstExcessCalls = median(excess), int(slices.Max(excess))
	rep.LastCallAfterOpenMs, rep.WorstLastCallAfterOpenMs = median(last), slices.Max(last)
	rep.Calls = median(each(rs, func(r OutageRounds) float64 { return float64(r.Calls) }))
	rep.CallsBeforeOpen = median(each(rs, func(r OutageRounds) float64 { return float64(r.CallsBeforeOpen) }))
	rep.ProviderInFlightAtOpen = median(each(rs, func(r OutageRounds) float64 { return float64(r.ProviderInFlightAtOpen) }))
	rep.RequestsInFlightAtOpen = median(each(rs, func(r OutageRounds) float64 { return float64(r.RequestsInFlightAtOpen) }))
	return rep
}

func summarizeMemory(o Options, detour, baseline []memoryResult) *MemoryReport {
	rep := &MemoryReport{Workers: o.MemoryInFlight, DelayMs: millis(o.MemoryDelay), InFlight: o.MemoryInFlight,
		MemoryFigures: memoryFigures(detour), Baseline: memoryFigures(baseline)}
	var above, waiting, allocated []float64
	for i := range min(len(detour), len(baseline)) {
		above = append(above, detour[i].kibPerRequest()-baseline[i].kibPerRequest())
	}
	for _, r := range detour {
		if r.waiting.stacks != 0 {
			waiting = append(waiting, float64(r.waiting.stacks)/1024)
			allocated = append(allocated, float64(r.answered.allocated-r.waiting.allocated)/1024/float64(r.inFlight))
		}
	}
	rep.AboveBaselineKiB, rep.StacksWaitingKiB, rep.AllocatedPerAnswerKiB = median(above), median(waiting), median(allocated)
	rep.StacksAnsweredKiB = median(each(detour, func(r memoryResult) float64 { return float64(r.answered.stacks) / 1024 }))
	return rep
}

func memoryFigures(rs []memoryResult) MemoryFigures {
	f := MemoryFigures{
		PeakInFlight: int(median(each(rs, func(r memoryResult) float64 { return float64(r.inFlight) }))),
		IdleRSSKiB:   median(each(rs, func(r memoryResult) float64 { return float64(r.idle) / 1024 })),
		PeakRSSKiB:   median(each(rs, func(r memoryResult) float64 { return float64(r.peak) / 1024 })),
		PeakFromHWM:  !slices.ContainsFunc(rs, func(r memoryResult) bool { return !r.peakFromHWM }),
		RoundsKiB:    each(rs, memoryResult.kibPerRequest),
	}
	f.KiBPerRequest = median(f.RoundsKiB)
	return f
}

// median of xs, which it does not change; 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s, n := slices.Sorted(slices.Values(xs)), len(xs)
	return (s[(n-1)/2] + s[n/2]) / 2 // one middle value, or the mean of two
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func mib(bytes int64) float64        { return float64(bytes) / (1 << 20) }
