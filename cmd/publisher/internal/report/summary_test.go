package report_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/client"
	"github.com/detourhq/detour/cmd/publisher/internal/report"
	"github.com/detourhq/detour/internal/text"
)

func ms(n ...int) []time.Duration {
	out := make([]time.Duration, len(n))
	for i, v := range n {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func TestQuantilesOfSortsItsInput(t *testing.T) {
	q := report.QuantilesOf(ms(30, 10, 20))
	want := report.Quantiles{N: 3, P50: 20 * time.Millisecond, P95: 30 * time.Millisecond, P99: 30 * time.Millisecond}
	if q != want {
		t.Fatalf("quantiles %+v, want %+v", q, want)
	}
	if s := q.String(); s != "20/30/30 ms" {
		t.Fatalf("String() = %q", s)
	}
	if s := report.QuantilesOf(ms(1, 2)).String(); s != "1/2/2 ms" {
		t.Fatalf("String() = %q", s)
	}
	if s := report.QuantilesOf([]time.Duration{1500 * time.Microsecond}).String(); s != "1.5/1.5/1.5 ms" {
		t.Fatalf("String() = %q", s)
	}
	if s := (report.Quantiles{}).String(); s != "-" {
		t.Fatalf("String() of none = %q", s)
	}
}

// fake describes one outcome compactly; outcomes publishes the i-th at
// t0+i·10ms and has its result arrive e2e later.
type fake struct {
	provider, model string
	position        int
	status          chain.Status // "" for no result
	latencyMs       int64
	e2e             time.Duration
	unsent, dup     bool
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func outcomes(fakes ...fake) []client.Outcome {
	out := make([]client.Outcome, len(fakes))
	for i, f := range fakes {
		o := client.Outcome{Receipt: client.Receipt{ID: "r" + string(rune('a'+i))}}
		if f.unsent {
			o.Err = client.ErrNotPublished
			out[i] = o
			continue
		}
		o.Published = t0.Add(time.Duration(i) * 10 * time.Millisecond)
		o.Duplicate = f.dup
		if f.status == "" {
			o.Err = client.ErrNoResult
			out[i] = o
			continue
		}
		o.Result = chain.Result{ID: o.ID, Status: f.status, Provider: f.provider, Model: f.model,
			Position: f.position, Degraded: f.position > 0, LatencyMs: f.latencyMs}
		o.Arrived = o.Published.Add(f.e2e)
		if f.dup {
			o.Arrived = t0.Add(-time.Hour) // stored by an earlier run
		}
		out[i] = o
	}
	return out
}

func TestSummarize(t *testing.T) {
	primary := func(lat int64, e2e time.Duration) fake {
		return fake{provider: "primary", model: "p-model", status: chain.StatusOK, latencyMs: lat, e2e: e2e}
	}
	backup := func(lat int64, e2e time.Duration) fake {
		return fake{provider: "backup", model: "b-model", position: 1, status: chain.StatusOK, latencyMs: lat, e2e: e2e}
	}
	failed := fake{status: chain.StatusFailed, latencyMs: 40, e2e: 50 * time.Millisecond}
	tests := map[string]struct {
		in   []client.Outcome
		want report.Summary
		rows []string // provider/model results ok degraded failed latency e2e
	}{
		"nothing": {
			in:   nil,
			want: report.Summary{Chain: "c"},
		},
		"all ok on the first provider": {
			in: outcomes(primary(10, 20*time.Millisecond), primary(30, 40*time.Millisecond)),
			want: report.Summary{Chain: "c", Requests: 2, Sent: 2, Results: 2, OK: 2,
				Span:     50 * time.Millisecond, // first publish at +0, last arrival at +10+40
				Latency:  report.Quantiles{N: 2, P50: 10 * time.Millisecond, P95: 30 * time.Millisecond, P99: 30 * time.Millisecond},
				EndToEnd: report.Quantiles{N: 2, P50: 20 * time.Millisecond, P95: 40 * time.Millisecond, P99: 40 * time.Millisecond}},
			rows: []string{"primary/p-model 2 2 0 0 10/30/30 ms 20/40/40 ms"},
		},
		"degraded, failed, missing and unsent": {
			in: outcomes(backup(5, 8*time.Millisecond), primary(1, 2*time.Millisecond), failed,
				backup(7, 9*time.Millisecond), fake{}, fake{unsent: true}),
			want: report.Summary{Chain: "c", Requests: 6, Sent: 5, Results: 4, OK: 3, Failed: 1, Missing: 1, Unsent: 1,
				Degraded: 2, MissingIDs: []string{"re"},
				Span:     70 * time.Millisecond, // the failed result, published at +20, arrives at +70
				Latency:  report.Quantiles{N: 4, P50: 5 * time.Millisecond, P95: 40 * time.Millisecond, P99: 40 * time.Millisecond},
				EndToEnd: report.Quantiles{N: 4, P50: 8 * time.Millisecond, P95: 50 * time.Millisecond, P99: 50 * time.Millisecond}},
			rows: []string{
				"primary/p-model 1 1 0 0 1/1/1 ms 2/2/2 ms",
				"backup/b-model 2 2 2 0 5/7/7 ms 8/9/9 ms",
				"/ 1 0 0 1 40/40/40 ms 50/50/50 ms",
			},
		},
		"a duplicate has a result but no end-to-end time": {
			in: outcomes(fake{provider: "primary", model: "p-model", status: chain.StatusOK, latencyMs: 3, dup: true}),
			want: report.Summary{Chain: "c", Requests: 1, Sent: 1, Results: 1, OK: 1, Duplicates: 1,
				Latency: report.Quantiles{N: 1, P50: 3 * time.Millisecond, P95: 3 * time.Millisecond, P99: 3 * time.Millisecond}},
			rows: []string{"primary/p-model 1 1 0 0 3/3/3 ms -"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := report.Summarize("c", tt.in)
			var rows []string
			for _, r := range got.Rows {
				rows = append(rows, strings.Join([]string{r.Provider + "/" + r.Model, strconv.Itoa(r.Results), strconv.Itoa(r.OK),
					strconv.Itoa(r.Degraded), strconv.Itoa(r.Failed), r.Latency.String(), r.EndToEnd.String()}, " "))
			}
			if !reflect.DeepEqual(rows, tt.rows) {
				t.Errorf("rows:\n got %q\nwant %q", rows, tt.rows)
			}
			got.Rows = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("summary:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestSummaryFailuresAndDegradedShare(t *testing.T) {
	tests := map[string]struct {
		s        report.Summary
		failures int
		share    float64
	}{
		"clean":              {report.Summary{OK: 10}, 0, 0},
		"no answers":         {report.Summary{Missing: 3}, 3, 0},
		"every kind of loss": {report.Summary{OK: 4, Degraded: 1, Failed: 1, Missing: 2, Unsent: 3}, 6, 0.25},
		"all degraded":       {report.Summary{OK: 8, Degraded: 8}, 0, 1},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if f := tt.s.Failures(); f != tt.failures {
				t.Errorf("failures %d, want %d", f, tt.failures)
			}
			if s := tt.s.DegradedShare(); s != tt.share {
				t.Errorf("degraded share %v, want %v", s, tt.share)
			}
		})
	}
}

func TestSummaryText(t *testing.T) {
	s := report.Summarize("default", outcomes(
		fake{provider: "primary", model: "p-model", status: chain.StatusOK, latencyMs: 12, e2e: 30 * time.Millisecond},
		fake{provider: "backup", model: "b-model", position: 1, status: chain.StatusOK, latencyMs: 80, e2e: 95 * time.Millisecond},
		fake{status: chain.StatusFailed, latencyMs: 200, e2e: 210 * time.Millisecond},
		fake{},
	))
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `chain default: 4 requests, 4 sent, 3 results in 230ms (13.0/s)
ok 2, degraded 1 (50.0% of ok), failed 1, no result 1, not sent 0

PROVIDER     MODEL    REQUESTS  RESULTS  OK  DEGRADED    FAILED  LATENCY p50/p95/p99  END-TO-END p50/p95/p99
primary      p-model  1         1        1   0 (0.0%)    0       12/12/12 ms          30/30/30 ms
backup       b-model  1         1        1   1 (100.0%)  0       80/80/80 ms          95/95/95 ms
(failed)     -        1         1        0   -           1       200/200/200 ms       210/210/210 ms
(no result)  -        1         0        0   -           0       -                    -
TOTAL                 4         3        2   1 (50.0%)   1       80/200/200 ms        95/210/210 ms

no result for: rd
`
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestSummaryTextShowsControlsAsEscapes: provider and model names from
// the results, and ids without a result, that hold terminal controls are
// printed as escapes, each row on one line.
func TestSummaryTextShowsControlsAsEscapes(t *testing.T) {
	outs := outcomes(
		fake{provider: "p\x1b]0;pwned\a", model: "m\x1b[2J\nFORGED  ROW", status: chain.StatusOK, latencyMs: 10, e2e: 20 * time.Millisecond},
		fake{},
	)
	outs[1].ID = "id\r\x1b[K\u202e"
	var b strings.Builder
	if err := report.Summarize("default", outs).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, line := range strings.Split(got, "\n") {
		if text.Visible(line) != line {
			t.Fatalf("raw control character in %q:\n%s", line, got)
		}
	}
	for _, want := range []string{
		"\n" + `p\x1b]0;pwned\a  m\x1b[2J\nFORGED  ROW  1 `,
		"\nno result for: " + `id\r\x1b[K\u202e` + "\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

// TestSummaryTextStopped is a run stopped by Ctrl-C after 3 of 8 requests:
// the heading and the table both count 5 requests not sent, and not as
// failed.
func TestSummaryTextStopped(t *testing.T) {
	ok := fake{provider: "primary", model: "p-model", status: chain.StatusOK, latencyMs: 10, e2e: 20 * time.Millisecond}
	unsent := fake{unsent: true}
	s := report.Summarize("default", outcomes(ok, ok, ok, unsent, unsent, unsent, unsent, unsent))
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `chain default: 8 requests, 3 sent, 3 results in 40ms (75.0/s)
ok 3, degraded 0 (0.0% of ok), failed 0, no result 0, not sent 5

PROVIDER    MODEL    REQUESTS  RESULTS  OK  DEGRADED  FAILED  LATENCY p50/p95/p99  END-TO-END p50/p95/p99
primary     p-model  3         3        3   0 (0.0%)  0       10/10/10 ms          20/20/20 ms
(not sent)  -        5         0        0   -         0       -                    -
TOTAL                8         3        3   0 (0.0%)  0       10/10/10 ms          20/20/20 ms
`
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if s.Failures() != 5 {
		t.Errorf("failures %d: a request not sent still makes the run fail", s.Failures())
	}
}

func TestSummaryJSON(t *testing.T) {
	s := report.Summarize("default", outcomes(
		fake{provider: "primary", model: "p-model", status: chain.StatusOK, latencyMs: 12, e2e: 30 * time.Millisecond},
		fake{provider: "backup", model: "b-model", position: 1, status: chain.StatusOK, latencyMs: 80, e2e: 95 * time.Millisecond},
		fake{},
	))
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"chain": "default", "requests": 3.0, "sent": 3.0, "results": 2.0, "ok": 2.0, "failed": 0.0,
		"missing": 1.0, "unsent": 0.0, "failures": 1.0, "degraded": 1.0, "degraded_share": 0.5,
		"missing_ids":   []any{"rc"},
		"latency_ms":    map[string]any{"n": 2.0, "p50": 12.0, "p95": 80.0, "p99": 80.0},
		"end_to_end_ms": map[string]any{"n": 2.0, "p50": 30.0, "p95": 95.0, "p99": 95.0},
	} {
		if !reflect.DeepEqual(got[key], want) {
			t.Errorf("%s = %#v, want %#v", key, got[key], want)
		}
	}
	rows, _ := got["by_model"].([]any)
	if len(rows) != 2 {
		t.Fatalf("by_model %v; want 2 rows", got["by_model"])
	}
	backup, _ := rows[1].(map[string]any)
	if backup["provider"] != "backup" || backup["degraded_share"] != 1.0 || backup["results"] != 1.0 {
		t.Errorf("backup row %v", backup)
	}
	empty, _ := json.Marshal(report.Summarize("x", nil))
	if !strings.Contains(string(empty), `"latency_ms":{"n":0,"p50":null,"p95":null,"p99":null}`) ||
		!strings.Contains(string(empty), `"by_model":[]`) || !strings.Contains(string(empty), `"missing_ids":[]`) {
		t.Errorf("empty summary %s", empty)
	}
}
