package bench

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// WriteTable prints the report as text: the machine, then one section per
// scenario with its figures and its targets.
func WriteTable(w io.Writer, r *Report) error {
	m := r.Machine
	model := m.CPUModel
	if model == "" {
		model = "unknown CPU"
	}
	fmt.Fprintf(w, "machine: %d CPUs, GOMAXPROCS %d, %s, %s/%s, %s; load average %.2f at the start, %.2f at the end\n",
		m.CPUs, m.GOMAXPROCS, model, m.OS, m.Arch, m.Go, m.LoadStart, m.LoadEnd)
	warm := ""
	if r.WarmUp && r.Throughput != nil {
		warm = " (throughput after a discarded warm-up round)"
	}
	rounds := "rounds"
	if r.Rounds == 1 {
		rounds = "round"
	}
	fmt.Fprintf(w, "server:  %s; figures are medians of %d %s%s\n", r.Server, r.Rounds, rounds, warm)
	for _, s := range Scenarios {
		sec := section{w: w, r: r, name: s}
		switch {
		case s == Throughput && r.Throughput != nil:
			sec.throughput(r.Throughput)
		case s == Latency && r.Latency != nil:
			sec.latency(r.Latency)
		case s == Scaling && r.Scaling != nil:
			sec.scaling(r.Scaling)
		case s == Outage && r.Outage != nil:
			sec.outage(r.Outage)
		case s == Memory && r.Memory != nil:
			sec.memory(r.Memory)
		case r.Errors[s] != "":
			fmt.Fprintf(w, "\n%s\n", strings.ToUpper(s))
		default:
			continue
		}
		sec.footer()
	}
	_, err := fmt.Fprintln(w)
	return err
}

// section prints one scenario.
type section struct {
	w    io.Writer
	r    *Report
	name string
}

func (s section) header(format string, args ...any) {
	fmt.Fprintf(s.w, "\n%s  %s\n", strings.ToUpper(s.name), fmt.Sprintf(format, args...))
}

// table prints rows in columns, the first left-aligned and the others
// right-aligned.
func (s section) table(rows [][]string) {
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
			switch {
			case i == 0:
				line.WriteString(cell + pad)
			default:
				line.WriteString("  " + pad + cell)
			}
		}
		fmt.Fprintln(s.w, strings.TrimRight(line.String(), " "))
	}
}

// footer prints the scenario's error, if any, and its targets.
func (s section) footer() {
	if e := s.r.Errors[s.name]; e != "" {
		fmt.Fprintf(s.w, "error: %s\n", e)
	}
	for _, t := range s.r.Targets {
		if t.Scenario != s.name {
			continue
		}
		verdict := "-"
		if t.Holds != nil {
			verdict = "NO"
			if *t.Holds {
				verdict = "yes"
			}
		}
		text, measured := s.targetWidths()
		fmt.Fprintf(s.w, "  target %d: %-*s %-*s %s\n", t.ID, text, t.Text, measured, t.Measured, verdict)
	}
}

// targetWidths are the widths of the targets' text and measured columns:
// the report's longest of each, so that every measure and verdict lines
// up, and at least 60 and 30.
func (s section) targetWidths() (text, measured int) {
	text, measured = 60, 30
	for _, t := range s.r.Targets {
		text = max(text, utf8.RuneCountInString(t.Text))
		measured = max(measured, utf8.RuneCountInString(t.Measured))
	}
	return text, measured
}

func (s section) throughput(t *ThroughputReport) {
	s.header("%d preloaded requests of %d B, one process of %d workers", t.Requests, t.RequestBytes, t.Workers)
	rows := [][]string{{"pipeline", "req/s", "CPU/request", "result B", "req/s vs baseline", "CPU vs baseline", "bench CPU/request"}}
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
	}
	if !benchCPU {
		for i := range rows {
			rows[i] = rows[i][:6]
		}
	}
	s.table(rows)
	if benchCPU && t.BenchCPUWithServer {
		fmt.Fprintln(s.w, "bench CPU: the bench process's own over the same time, mostly the embedded server's work (also reading results back, and serving the HTTP fake)")
	} else if benchCPU {
		fmt.Fprintln(s.w, "bench CPU: the bench process's own over the same time: reading results back (and serving the HTTP fake); the server's is not counted")
	}
	for _, p := range t.Pipelines {
		if p.NotOK > 0 {
			fmt.Fprintf(s.w, "note: %d results of %s were not ok\n", p.NotOK, p.Name)
		}
	}
}

func (s section) latency(l *LatencyReport) {
	s.header("%d requests/s for %gs after %gs of warm-up, one process each", l.Rate, l.Seconds, l.WarmUpSeconds)
	rows := [][]string{{"pipeline", "p50", "p99", "p50 vs baseline", "p99 vs baseline"}}
	for _, p := range l.Pipelines {
		row := []string{p.Name, fmt.Sprintf("%.2f ms", p.P50Ms), fmt.Sprintf("%.2f ms", p.P99Ms), "", ""}
		if p.P50Ratio != 0 {
			row[3], row[4] = fmt.Sprintf("%.2f", p.P50Ratio), fmt.Sprintf("%.2f", p.P99Ratio)
		}
		rows = append(rows, row)
	}
	s.table(rows)
}

func (s section) scaling(sc *ScalingReport) {
	s.header("processors of %d workers each, over a preloaded backlog", sc.InProcess.Workers)
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
	s.table(rows)
}

func (s section) outage(o *OutageReport) {
	s.header("%d processors × %d workers, %d requests, a primary answering 500 before a healthy backup",
		o.Processors, o.Workers, o.Requests)
	s.table([][]string{
		{"calls the dead provider received", fmt.Sprintf("%.0f", o.Calls)},
		{"  of which before the cooldown key was created", fmt.Sprintf("%.0f", o.CallsBeforeOpen)},
		{"failure_threshold (max_retries)", fmt.Sprintf("%d (%d)", o.FailureThreshold, o.MaxRetries)},
		{"requests in flight when the key was created", fmt.Sprintf("%.0f", o.RequestsInFlightAtOpen)},
		{"calls in flight at the dead provider when the bench saw it", fmt.Sprintf("%.0f", o.ProviderInFlightAtOpen)},
		{"calls beyond failure_threshold + requests in flight", fmt.Sprintf("%+.0f (worst round %+d)", o.ExcessCalls, o.WorstExcessCalls)},
		{"its last call after the key was created", fmt.Sprintf("%.1f ms (worst round %.1f ms)", o.LastCallAfterOpenMs, o.WorstLastCallAfterOpenMs)},
	})
}

func (s section) memory(m *MemoryReport) {
	s.header("one processor of %d workers, a provider answering in %gms; beside it, net/http alone making as many calls", m.Workers, m.DelayMs)
	peak := func(f MemoryFigures) string {
		if f.PeakFromHWM {
			return "VmHWM"
		}
		return "sampled VmRSS"
	}
	s.table([][]string{
		{"", "detour", "net/http alone"},
		{"idle RSS", fmt.Sprintf("%.1f MiB", m.IdleRSSKiB/1024), fmt.Sprintf("%.1f MiB", m.Baseline.IdleRSSKiB/1024)},
		{"peak RSS", fmt.Sprintf("%.1f MiB (%s)", m.PeakRSSKiB/1024, peak(m.MemoryFigures)),
			fmt.Sprintf("%.1f MiB (%s)", m.Baseline.PeakRSSKiB/1024, peak(m.Baseline))},
		{"calls in flight at most", fmt.Sprint(m.PeakInFlight), fmt.Sprint(m.Baseline.PeakInFlight)},
		{"per call in flight", fmt.Sprintf("%.1f KiB", m.KiBPerRequest), fmt.Sprintf("%.1f KiB", m.Baseline.KiBPerRequest)},
		{"detour's own, per call", fmt.Sprintf("%.1f KiB", m.AboveBaselineKiB), ""},
		{"goroutine stacks, calls waiting", fmt.Sprintf("%.1f MiB", m.StacksWaitingKiB/1024), ""},
		{"goroutine stacks, answers stored", fmt.Sprintf("%.1f MiB", m.StacksAnsweredKiB/1024), ""},
		{"allocated per call, answers coming back", fmt.Sprintf("%.1f KiB", m.AllocatedPerAnswerKiB), ""},
	})
	fmt.Fprintln(s.w, "stacks: all the processor's goroutines (workers, connections' read and write loops), from its /metrics;")
	fmt.Fprintln(s.w, "        more once the answers are stored than while the calls wait means a worker's stack doubled")
}
