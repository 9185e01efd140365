package bench

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The bench process's CPU is the server's work only when the server is
// embedded; the table says which it is, and leaves the column out when it
// was not measured.
func TestThroughputTableSaysWhatTheBenchCPUHolds(t *testing.T) {
	pipelines := func(benchCPU float64) []PipelineThroughput {
		return []PipelineThroughput{
			{Name: nameBaseline, ReqPerSec: 100, CPUPerReqUs: 10, CPUFromProc: true, BenchCPUPerReqUs: benchCPU},
			{Name: nameDetourRule, ReqPerSec: 50, CPUPerReqUs: 20, CPUFromProc: true, BenchCPUPerReqUs: benchCPU,
				ThroughputRatio: 0.5, CPURatio: 2},
		}
	}
	for _, tc := range []struct {
		name     string
		report   ThroughputReport
		want     []string
		dontWant []string
	}{
		{"embedded", ThroughputReport{BenchCPUWithServer: true, Pipelines: pipelines(30)},
			[]string{"bench CPU/request", "30.0 µs", "mostly the embedded server's work"}, []string{"not counted"}},
		{"external", ThroughputReport{Pipelines: pipelines(7)},
			[]string{"bench CPU/request", "7.0 µs", "the server's is not counted"}, []string{"embedded server's work"}},
		{"not measured", ThroughputReport{BenchCPUWithServer: true, Pipelines: pipelines(0)},
			nil, []string{"bench CPU"}},
	} {
		var out strings.Builder
		if err := WriteTable(&out, &Report{Throughput: &tc.report}); err != nil {
			t.Fatal(err)
		}
		for _, s := range tc.want {
			if !strings.Contains(out.String(), s) {
				t.Errorf("%s: the table has no %q:\n%s", tc.name, s, out.String())
			}
		}
		for _, s := range tc.dontWant {
			if strings.Contains(out.String(), s) {
				t.Errorf("%s: the table has %q:\n%s", tc.name, s, out.String())
			}
		}
	}
}

// The header speaks of the throughput's warm-up round only when the
// throughput scenario ran, and of one round in the singular.
func TestTableHeaderSaysWhatRan(t *testing.T) {
	var out strings.Builder
	if err := WriteTable(&out, &Report{Rounds: 1, WarmUp: true, Memory: &MemoryReport{}}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "medians of 1 round;") && !strings.Contains(s, "medians of 1 round\n") || strings.Contains(s, "warm-up") {
		t.Errorf("header of a memory-only run of one round:\n%s", s)
	}
	out.Reset()
	if err := WriteTable(&out, &Report{Rounds: 5, WarmUp: true, Throughput: &ThroughputReport{}}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "medians of 5 rounds (throughput after a discarded warm-up round)") {
		t.Errorf("header of a throughput run:\n%s", s)
	}
}

// Every target's measure and verdict start in the same columns, however
// long a text or a measure is.
func TestTargetVerdictsLineUp(t *testing.T) {
	yes, no := true, false
	r := &Report{Rounds: 1, Throughput: &ThroughputReport{}, Memory: &MemoryReport{}, Targets: []Target{
		{ID: 1, Scenario: Throughput, Text: "short", Measured: "0.67×", Holds: &no},
		{ID: 6, Scenario: Memory, Text: "a longer text", Measured: "41.3 KiB (net/http alone: 32.2 KiB)", Holds: &no},
		{ID: 6, Scenario: Memory, Text: "unmeasured", Measured: "not measured"},
		{ID: 1, Scenario: Throughput, Text: "another", Measured: "1.90×", Holds: &yes},
		{ID: 5, Scenario: Memory, Text: strings.Repeat("a text longer than any column ", 4), Measured: "-3", Holds: &yes},
	}}
	var out strings.Builder
	if err := WriteTable(&out, r); err != nil {
		t.Fatal(err)
	}
	verdicts, measures := -1, -1
	for line := range strings.Lines(out.String()) {
		if !strings.HasPrefix(line, "  target ") {
			continue
		}
		line = strings.TrimRight(line, "\n")
		verdict := utf8.RuneCountInString(line[:strings.LastIndex(line, " ")])
		measure := -1
		for _, m := range []string{"0.67×", "41.3 KiB", "not measured", "1.90×", " -3 "} {
			if i := strings.Index(line, m); i >= 0 {
				measure = utf8.RuneCountInString(line[:i+len(m)-len(strings.TrimLeft(m, " "))])
			}
		}
		if verdicts >= 0 && (verdict != verdicts || measure != measures) {
			t.Fatalf("measures at columns %d and %d, verdicts at %d and %d:\n%s", measures, measure, verdicts, verdict, out.String())
		}
		verdicts, measures = verdict, measure
	}
	if verdicts < 0 {
		t.Fatalf("no target lines:\n%s", out.String())
	}
}
