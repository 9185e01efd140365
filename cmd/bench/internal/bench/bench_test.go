package bench

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/wire"
)

func TestRequestMsgIsAValidRequestOfTheSize(t *testing.T) {
	for _, i := range []int{0, 7, 29_999} {
		id := requestID("abcdef12", i)
		m := requestMsg(wire.RequestSubject(benchChain), id, 150)
		if n := len(m.Data); n < 145 || n > 155 {
			t.Errorf("request %s is %d bytes, want about 150", id, n)
		}
		d, err := wire.DecodeRequest(m.Data, m.Header, 1, []string{wire.ResultsPrefix})
		if err != nil || d.ID != id {
			t.Errorf("request %s does not decode as itself: %+v, %v", id, d.Request, err)
		}
		if got := requestIndex("abcdef12", id); got != i {
			t.Errorf("requestIndex(%q) = %d, want %d", id, got, i)
		}
	}
	if got := requestIndex("abcdef1", requestID("abcdef12", 3)); got != -1 {
		t.Errorf("another run's id has index %d, want -1", got)
	}
}

func TestOutputTailFindsTheReadyLineAcrossWrites(t *testing.T) {
	ready := make(chan struct{})
	o := &outputTail{marker: "msg=processing", found: ready}
	for _, w := range []string{"level=INFO msg=conn", "ected\nlevel=INFO msg=proc", "essing chains=[default]", "\nmore\n"} {
		_, _ = o.Write([]byte(w))
	}
	select {
	case <-ready:
	default:
		t.Fatal("ready line not found")
	}
	if !strings.HasSuffix(o.tail(), "more") {
		t.Errorf("tail = %q, want the output's end", o.tail())
	}
}

func TestProcReadsThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	if _, err := procCPU(os.Getpid()); err != nil {
		t.Errorf("procCPU: %v", err)
	}
	rss, peak, err := procMemory(os.Getpid())
	if err != nil || rss <= 0 || peak < rss {
		t.Errorf("procMemory = %d, %d, %v; want 0 < rss <= peak", rss, peak, err)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

// The baseline stores a result for every request and acks it only then: the
// work-queue stream ends empty and the results stream holds one per request.
func TestRunBaselineAnswersEveryRequest(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	b := &broker{url: srv.ClientURL(), nc: nc, js: js}
	ctx := t.Context()
	if err := b.baselineTopology(ctx, 100); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if _, err := js.PublishMsg(ctx, requestMsg(baselinePipe.subject, requestID("t", i), 150)); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	var log bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- RunBaseline(runCtx, srv.ClientURL(), 4, &log) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		results, err1 := js.Stream(ctx, baselinePipe.results)
		requests, err2 := js.Stream(ctx, baselinePipe.stream)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if results.CachedInfo().State.Msgs == n && requests.CachedInfo().State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %d results, %d requests left", results.CachedInfo().State.Msgs, requests.CachedInfo().State.Msgs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("RunBaseline: %v", err)
	}
	if !strings.Contains(log.String(), baselineReady) {
		t.Errorf("no ready line in %q", log.String())
	}
}

func TestEvaluateJudgesTheTargets(t *testing.T) {
	r := &Report{
		Throughput: &ThroughputReport{Pipelines: []PipelineThroughput{
			{Name: nameBaseline}, {Name: nameDetourRule, ThroughputRatio: 0.9, CPURatio: 1.5}, {Name: nameDetourHTTP}}},
		Scaling: &ScalingReport{
			Slow: &ScalingSeries{Points: []ScalingPoint{{Processors: 1, ShareOfAllowed: 0.95, VsOne: 1}, {Processors: 4, VsOne: 3.2}}},
			InProcess: &ScalingSeries{Points: []ScalingPoint{{Processors: 1, VsOne: 1}, {Processors: 2, VsPrevious: 1.5},
				{Processors: 4, VsPrevious: 0.97}}},
		},
		Outage: &OutageReport{ExcessCalls: 1, LastCallAfterOpenMs: 20},
	}
	r.evaluate()
	got := map[string]string{}
	for _, tg := range r.Targets {
		verdict := "-"
		if tg.Holds != nil {
			verdict = map[bool]string{true: "yes", false: "NO"}[*tg.Holds]
		}
		got[tg.Text] += verdict
	}
	want := map[string]string{
		"in-process: detour's req/s ≥ 0.85× the baseline's":                              "yes",
		"in-process: detour's CPU per request ≤ 1.2× the baseline's":                     "NO",
		"in-process: p50 end to end ≤ 1.5× the baseline's":                               "-",
		"slow provider: 4 processors ≥ 3.6× one":                                         "NO",
		"slow provider: one processor ≥ 90% of what its workers allow":                   "yes",
		"in-process: no added processor lowers req/s (within 5%)":                        "yes",
		"dead provider's calls ≤ failure_threshold + requests in flight at the cooldown": "NO",
		"every processor skips it within 100 ms of the cooldown":                         "yes",
		"peak RSS < 20 KiB per in-flight request above the idle process":                 "-",
	}
	for text, v := range want {
		if got[text] != v {
			t.Errorf("%q: %q, want %q", text, got[text], v)
		}
	}
}

// The outage target is judged round by round: medians of calls and of
// requests in flight taken apart could pair figures of different rounds.
func TestSummarizeOutageJudgesEachRound(t *testing.T) {
	rep := summarizeOutage(Default(), []OutageRounds{ // failure_threshold 3
		{Calls: 96, RequestsInFlightAtOpen: 96, LastCallAfterOpenMs: -1},
		{Calls: 96, RequestsInFlightAtOpen: 82, LastCallAfterOpenMs: 14},
		{Calls: 96, RequestsInFlightAtOpen: 95, LastCallAfterOpenMs: 2},
	})
	if rep.ExcessCalls != -2 || rep.WorstExcessCalls != 11 {
		t.Errorf("excess calls: median %v, worst %d; want -2 and 11", rep.ExcessCalls, rep.WorstExcessCalls)
	}
	if rep.LastCallAfterOpenMs != 2 || rep.WorstLastCallAfterOpenMs != 14 {
		t.Errorf("last call: median %v ms, worst %v ms; want 2 and 14", rep.LastCallAfterOpenMs, rep.WorstLastCallAfterOpenMs)
	}
}
