package bench

import (
	"fmt"
	"strings"
)

// scalingNoise is how much lower a step of the in-process scaling series may
// be than the one before and still count as not lowering throughput.
const scalingNoise = 0.05

// evaluate lists the performance targets with what the run measured; a target
// whose scenario did not run, or failed, is listed without a verdict.
func (r *Report) evaluate() {
	r.Targets = nil
	add := func(id int, scenario, text, measured string, holds bool, measuredOK bool) {
		t := Target{ID: id, Scenario: scenario, Text: text, Measured: measured}
		if measuredOK {
			t.Holds = &holds
		} else {
			t.Measured = "not measured"
		}
		r.Targets = append(r.Targets, t)
	}
	tp := r.Throughput
	var rules PipelineThroughput
	if tp != nil {
		rules = tp.Pipelines[1]
	}
	add(1, Throughput, "in-process: detour's req/s ≥ 0.85× the baseline's",
		fmt.Sprintf("%.2f×", rules.ThroughputRatio), rules.ThroughputRatio >= 0.85, tp != nil)
	add(1, Throughput, "in-process: detour's CPU per request ≤ 1.2× the baseline's",
		fmt.Sprintf("%.2f×", rules.CPURatio), rules.CPURatio <= 1.2, tp != nil)

	lat := r.Latency
	var lrules PipelineLatency
	if lat != nil {
		lrules = lat.Pipelines[1]
	}
	add(2, Latency, "in-process: p50 end to end ≤ 1.5× the baseline's",
		fmt.Sprintf("%.2f×", lrules.P50Ratio), lrules.P50Ratio <= 1.5, lat != nil)
	add(2, Latency, "in-process: p99 end to end ≤ 2× the baseline's",
		fmt.Sprintf("%.2f×", lrules.P99Ratio), lrules.P99Ratio <= 2, lat != nil)

	var slow, inProcess *ScalingSeries
	if r.Scaling != nil {
		slow, inProcess = r.Scaling.Slow, r.Scaling.InProcess
	}
	four, okFour := slow.point(4)
	add(3, Scaling, "slow provider: 4 processors ≥ 3.6× one",
		fmt.Sprintf("%.2f×", four.VsOne), four.VsOne >= 3.6, okFour)
	one, okOne := slow.point(1)
	add(3, Scaling, "slow provider: one processor ≥ 90% of what its workers allow",
		fmt.Sprintf("%.0f%%", 100*one.ShareOfAllowed), one.ShareOfAllowed >= 0.9, okOne)
	if inProcess != nil {
		var steps []string
		holds := true
		for i, p := range inProcess.Points[1:] {
			steps = append(steps, fmt.Sprintf("%d→%d %.2f×", inProcess.Points[i].Processors, p.Processors, p.VsPrevious))
			holds = holds && p.VsPrevious >= 1-scalingNoise
		}
		add(4, Scaling, fmt.Sprintf("in-process: no added processor lowers req/s (within %.0f%%)", 100*scalingNoise),
			strings.Join(steps, ", "), holds, len(steps) > 0)
	} else {
		add(4, Scaling, "in-process: no added processor lowers req/s", "", false, false)
	}

	out := r.Outage
	var o OutageReport
	if out != nil {
		o = *out
	}
	add(5, Outage, "dead provider's calls ≤ failure_threshold + requests in flight at the cooldown",
		fmt.Sprintf("%+.0f calls (worst round %+d)", o.ExcessCalls, o.WorstExcessCalls), o.ExcessCalls <= 0, out != nil)
	add(5, Outage, "every processor skips it within 100 ms of the cooldown",
		fmt.Sprintf("%.1f ms (worst round %.1f)", o.LastCallAfterOpenMs, o.WorstLastCallAfterOpenMs),
		o.LastCallAfterOpenMs <= 100, out != nil)

	mem := r.Memory
	var m MemoryReport
	if mem != nil {
		m = *mem
	}
	add(6, Memory, "peak RSS < 20 KiB per in-flight request above the idle process",
		fmt.Sprintf("%.1f KiB (net/http alone: %.1f KiB)", m.KiBPerRequest, m.Baseline.KiBPerRequest), m.KiBPerRequest < 20, mem != nil)
}

// point returns the series' point for procs processors.
func (s *ScalingSeries) point(procs int) (ScalingPoint, bool) {
	if s == nil {
		return ScalingPoint{}, false
	}
	for _, p := range s.Points {
		if p.Processors == procs {
			return p, true
		}
	}
	return ScalingPoint{}, false
}
