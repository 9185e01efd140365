package bench

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// WriteTable prints the report as text: the machine, then one section per
// scenario with its figures and its targets.
func WriteTable(w io.Writer, r *Report) error {
	m := r.Machine
	fmt.Fprintf(w, "machine: %d CPUs, GOMAXPROCS %d, %s, %s/%s, %s; load average %.2f at the start, %.2f at the end\n",
		m.CPUs, m.GOMAXPROCS, cmp.Or(m.CPUModel, "unknown CPU"), m.OS, m.Arch, m.Go, m.LoadStart, m.LoadEnd)
	warm, rounds := "", "rounds"
	if r.WarmUp && r.Throughput != nil {
		warm = " (throughput after a discarded warm-up round)"
	}
	if r.Rounds == 1 {
		rounds = "round"
	}
	fmt.Fprintf(w, "server:  %s; figures are medians of %d %s%s\n", r.Server, r.Rounds, rounds, warm)
	// Every target's measure and verdict line up across the sections.
	textWidth, measuredWidth := 60, 30
	for _, t := range r.Targets {
		textWidth = max(textWidth, utf8.RuneCountInString(t.Text))
		measuredWidth = max(measuredWidth, utf8.RuneCountInString(t.Measured))
	}
	for _, s := range Scenarios {
		var header string
		var rows [][]string
		var notes []string
		switch {
		case s == Throughput && r.Throughput != nil:
			header, rows, notes = throughputTable(r.Throughput)
		case s == Latency && r.Latency != nil:
			header, rows = latencyTable(r.Latency)
		case s == Scaling && r.Scaling != nil:
			header, rows = scalingTable(r.Scaling)
		case s == Outage && r.Outage != nil:
			header, rows = outageTable(r.Outage)
		case s == Memory && r.Memory != nil:
			header, rows = memoryTable(r.Memory)
			notes = []string{"stacks: all the processor's goroutines (workers, connections' read and write loops), from its /metrics;",
				"        more once the answers are stored than while the calls wait means a worker's stack doubled"}
		case r.Errors[s] == "":
			continue
		}
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(strings.ToUpper(s)+"  "+header))
		table(w, rows)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
		if e := r.Errors[s]; e != "" {
			fmt.Fprintf(w, "error: %s\n", e)
		}
		for _, t := range r.Targets {
			if t.Scenario != s {
				continue
			}
			verdict := "-"
			if t.Holds != nil {
				verdict = map[bool]string{true: "yes", false: "NO"}[*t.Holds]
			}
			fmt.Fprintf(w, "  target %d: %-*s %-*s %s\n", t.ID, textWidth, t.Text, measuredWidth, t.Measured, verdict)
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// table prints rows in columns, the first left-aligned and the others
// right-aligned.
func table(w io.Writer, rows [][]string) {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	for _, row := range rows {
		var line strings.Builder
		for i, cell := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			if i == 0 {
				line.WriteString(cell + pad)
			} else {
				line.WriteString("  " + pad + cell)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(line.String(), " "))
	}
}

func throughputTable(t *ThroughputReport) (header string, rows [][]string, notes []string) {
	header = fmt.Sprintf("%d preloaded requests of %d B, one process of %d workers", t.Requests, t.RequestBytes, t.Workers)
	rows = [][]string{{"pipeline", "req/s", "CPU/request", "result B", "req/s vs baseline", "CPU vs baseline", "bench CPU/request"}}
	benchCPU := false
	for _, p := range t.Pipelines {
		cpu := fmt.Sprintf("%.1f µs", p.CPUPerReqUs)
		if !p.CPUFromProc {
			cpu += " (rusage)"
		}
		row := []string{p.Name, fmt.Sprintf("%.0f", p.ReqPerSec), cpu, fmt.Sprintf("%.0f", p.ResultBytes), "", "", ""}
		if p.ThroughputRatio != 0 {
			row[4], row[5] = fmt.Sprintf("%.2f", p.ThroughputRatio), fmt.Sprintf("%.2f", p.CPURatio)
		}
		if p.BenchCPUPerReqUs > 0 {
			row[6], benchCPU = fmt.Sprintf("%.1f µs", p.BenchCPUPerReqUs), true
		}
		rows = append(rows, row)
		if p.NotOK > 0 {
			notes = append(notes, fmt.Sprintf("note: %d results of %s were not ok", p.NotOK, p.Name))
		}
	}
	switch {
	case !benchCPU:
		for i := range rows {
			rows[i] = rows[i][:6]
		}
	case t.BenchCPUWithServer:
		notes = append([]string{"bench CPU: the bench process's own over the same time, mostly the embedded server's work (also reading results back, and serving the HTTP fake)"}, notes...)
	default:
		notes = append([]string{"bench CPU: the bench process's own over the same time: reading results back (and serving the HTTP fake); the server's is not counted"}, notes...)
	}
	return header, rows, notes
}

func latencyTable(l *LatencyReport) (string, [][]string) {
	rows := [][]string{{"pipeline", "p50", "p99", "p50 vs baseline", "p99 vs baseline"}}
	for _, p := range l.Pipelines {
		row := []string{p.Name, fmt.Sprintf("%.2f ms", p.P50Ms), fmt.Sprintf("%.2f ms", p.P99Ms), "", ""}
		if p.P50Ratio != 0 {
			row[3], row[4] = fmt.Sprintf("%.2f", p.P50Ratio), fmt.Sprintf("%.2f", p.P99Ratio)
		}
		rows = append(rows, row)
	}
	return fmt.Sprintf("%d requests/s for %gs after %gs of warm-up, one process each", l.Rate, l.Seconds, l.WarmUpSeconds), rows
}

func scalingTable(sc *ScalingReport) (string, [][]string) {
	rows := [][]string{{"provider", "processors", "requests", "req/s", "CPU/request", "vs one", "vs previous", "of what workers allow"}}
	for _, series := range []*ScalingSeries{sc.Slow, sc.InProcess} {
		for _, p := range series.Points {
			row := []string{series.Provider, fmt.Sprint(p.Processors), fmt.Sprint(p.Requests), fmt.Sprintf("%.0f", p.ReqPerSec),
				fmt.Sprintf("%.1f µs", p.CPUPerReqUs), fmt.Sprintf("%.2f", p.VsOne), "", ""}
			if p.VsPrevious != 0 {
				row[6] = fmt.Sprintf("%.2f", p.VsPrevious)
			}
			if p.Allowed != 0 {
				row[7] = fmt.Sprintf("%.0f%% of %.0f", 100*p.ShareOfAllowed, p.Allowed)
			}
			rows = append(rows, row)
		}
	}
	return fmt.Sprintf("processors of %d workers each, over a preloaded backlog", sc.InProcess.Workers), rows
}

func outageTable(o *OutageReport) (string, [][]string) {
	return fmt.Sprintf("%d processors × %d workers, %d requests, a primary answering 500 before a healthy backup",
			o.Processors, o.Workers, o.Requests), [][]string{
			{"calls the dead provider received", fmt.Sprintf("%.0f", o.Calls)},
			{"  of which before the cooldown key was created", fmt.Sprintf("%.0f", o.CallsBeforeOpen)},
			{"failure_threshold (max_retries)", fmt.Sprintf("%d (%d)", o.FailureThreshold, o.MaxRetries)},
			{"requests in flight when the key was created", fmt.Sprintf("%.0f", o.RequestsInFlightAtOpen)},
			{"calls in flight at the dead provider when the bench saw it", fmt.Sprintf("%.0f", o.ProviderInFlightAtOpen)},
			{"calls beyond failure_threshold + requests in flight", fmt.Sprintf("%+.0f (worst round %+d)", o.ExcessCalls, o.WorstExcessCalls)},
			{"its last call after the key was created", fmt.Sprintf("%.1f ms (worst round %.1f ms)", o.LastCallAfterOpenMs, o.WorstLastCallAfterOpenMs)},
		}
}

func memoryTable(m *MemoryReport) (string, [][]string) {
	peak := func(f MemoryFigures) string {
		source := "sampled VmRSS"
		if f.PeakFromHWM {
			source = "VmHWM"
		}
		return fmt.Sprintf("%.1f MiB (%s)", f.PeakRSSKiB/1024, source)
	}
	return fmt.Sprintf("one processor of %d workers, a provider answering in %gms; beside it, net/http alone making as many calls", m.Workers, m.DelayMs),
		[][]string{
			{"", "detour", "net/http alone"},
			{"idle RSS", fmt.Sprintf("%.1f MiB", m.IdleRSSKiB/1024), fmt.Sprintf("%.1f MiB", m.Baseline.IdleRSSKiB/1024)},
			{"peak RSS", peak(m.MemoryFigures), peak(m.Baseline)},
			{"calls in flight at most", fmt.Sprint(m.PeakInFlight), fmt.Sprint(m.Baseline.PeakInFlight)},
			{"per call in flight", fmt.Sprintf("%.1f KiB", m.KiBPerRequest), fmt.Sprintf("%.1f KiB", m.Baseline.KiBPerRequest)},
			{"detour's own, per call", fmt.Sprintf("%.1f KiB", m.AboveBaselineKiB), ""},
			{"goroutine stacks, calls waiting", fmt.Sprintf("%.1f MiB", m.StacksWaitingKiB/1024), ""},
			{"goroutine stacks, answers stored", fmt.Sprintf("%.1f MiB", m.StacksAnsweredKiB/1024), ""},
			{"allocated per call, answers coming back", fmt.Sprintf("%.1f KiB", m.AllocatedPerAnswerKiB), ""},
		}
}
