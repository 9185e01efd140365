package bench

import (
	"fmt"
	"strings"

	"github.com/samber/lo"
)

// scalingNoise is how much lower a step of the in-process scaling series may
// be than the one before and still count as not lowering throughput.
const scalingNoise = 0.05

// evaluate lists the performance targets with what the run measured; a target
// whose scenario did not run, or failed, is listed without a verdict.
func (r *Report) evaluate() {
	r.Targets = nil
	add := func(id int, scenario, text, measured string, holds, ran bool) {
		t := Target{ID: id, Scenario: scenario, Text: text, Measured: "not measured"}
		if ran {
			t.Measured, t.Holds = measured, &holds
		}
		r.Targets = append(r.Targets, t)
	}
	// A scenario that did not run reads as zero values.
	tp := lo.NthOrEmpty(lo.FromPtr(r.Throughput).Pipelines, 1)
	add(1, Throughput, "in-process: detour's req/s ≥ 0.85× the baseline's",
		fmt.Sprintf("%.2f×", tp.ThroughputRatio), tp.ThroughputRatio >= 0.85, r.Throughput != nil)
	add(1, Throughput, "in-process: detour's CPU per request ≤ 1.2× the baseline's",
		fmt.Sprintf("%.2f×", tp.CPURatio), tp.CPURatio <= 1.2, r.Throughput != nil)

	lat := lo.NthOrEmpty(lo.FromPtr(r.Latency).Pipelines, 1)
	add(2, Latency, "in-process: p50 end to end ≤ 1.5× the baseline's",
		fmt.Sprintf("%.2f×", lat.P50Ratio), lat.P50Ratio <= 1.5, r.Latency != nil)
	add(2, Latency, "in-process: p99 end to end ≤ 2× the baseline's",
		fmt.Sprintf("%.2f×", lat.P99Ratio), lat.P99Ratio <= 2, r.Latency != nil)

	sc := lo.FromPtr(r.Scaling)
	slow, inProcess := lo.FromPtr(sc.Slow), lo.FromPtr(sc.InProcess)
	four, okFour := slow.point(4)
	add(3, Scaling, "slow provider: 4 processors ≥ 3.6× one", fmt.Sprintf("%.2f×", four.VsOne), four.VsOne >= 3.6, okFour)
	one, okOne := slow.point(1)
	add(3, Scaling, "slow provider: one processor ≥ 90% of what its workers allow",
		fmt.Sprintf("%.0f%%", 100*one.ShareOfAllowed), one.ShareOfAllowed >= 0.9, okOne)
	var steps []string
	holds := true
	for i := 1; i < len(inProcess.Points); i++ {
		p := inProcess.Points[i]
		steps = append(steps, fmt.Sprintf("%d→%d %.2f×", inProcess.Points[i-1].Processors, p.Processors, p.VsPrevious))
		holds = holds && p.VsPrevious >= 1-scalingNoise
	}
	add(4, Scaling, fmt.Sprintf("in-process: no added processor lowers req/s (within %.0f%%)", 100*scalingNoise),
		strings.Join(steps, ", "), holds, len(steps) > 0)

	o := lo.FromPtr(r.Outage)
	add(5, Outage, "dead provider's calls ≤ failure_threshold + requests in flight at the cooldown",
		fmt.Sprintf("%+.0f calls (worst round %+d)", o.ExcessCalls, o.WorstExcessCalls), o.ExcessCalls <= 0, r.Outage != nil)
	add(5, Outage, "every processor skips it within 100 ms of the cooldown",
		fmt.Sprintf("%.1f ms (worst round %.1f)", o.LastCallAfterOpenMs, o.WorstLastCallAfterOpenMs),
		o.LastCallAfterOpenMs <= 100, r.Outage != nil)

	m := lo.FromPtr(r.Memory)
	add(6, Memory, "peak RSS < 20 KiB per in-flight request above the idle process",
		fmt.Sprintf("%.1f KiB (net/http alone: %.1f KiB)", m.KiBPerRequest, m.Baseline.KiBPerRequest), m.KiBPerRequest < 20, r.Memory != nil)
}

// point returns the series' point for procs processors.
func (s ScalingSeries) point(procs int) (ScalingPoint, bool) {
	return lo.Find(s.Points, func(p ScalingPoint) bool { return p.Processors == procs })
}
