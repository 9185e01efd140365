package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/samber/lo"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/client"
	"github.com/detourhq/detour/internal/percentile"
	"github.com/detourhq/detour/internal/text"
)

// Quantiles are the 50th, 95th and 99th percentiles of N durations.
type Quantiles struct {
	N             int
	P50, P95, P99 time.Duration
}

// QuantilesOf computes the Quantiles of ds, which it sorts in place.
func QuantilesOf(ds []time.Duration) Quantiles {
	slices.Sort(ds)
	return Quantiles{N: len(ds), P50: percentile.Of(ds, 50), P95: percentile.Of(ds, 95), P99: percentile.Of(ds, 99)}
}

// MarshalJSON writes the percentiles in milliseconds to the microsecond;
// with no values they are null.
func (q Quantiles) MarshalJSON() ([]byte, error) {
	ms := func(d time.Duration) *float64 {
		if q.N == 0 {
			return nil
		}
		return new(float64(d.Round(time.Microsecond)) / float64(time.Millisecond))
	}
	return json.Marshal(struct {
		N   int      `json:"n"`
		P50 *float64 `json:"p50"`
		P95 *float64 `json:"p95"`
		P99 *float64 `json:"p99"`
	}{q.N, ms(q.P50), ms(q.P95), ms(q.P99)})
}

// String is "p50/p95/p99 ms", or "-" with no values.
func (q Quantiles) String() string {
	if q.N == 0 {
		return "-"
	}
	return formatMs(q.P50) + "/" + formatMs(q.P95) + "/" + formatMs(q.P99) + " ms"
}

// formatMs prints whole milliseconds, with one decimal below 10 ms where
// local runs land.
func formatMs(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 10 && d%time.Millisecond != 0 {
		return strconv.FormatFloat(ms, 'f', 1, 64)
	}
	return strconv.FormatFloat(math.Round(ms), 'f', 0, 64)
}

// Row is what the results of one provider and model add up to. Failed
// results, which name no provider, have a row of their own with Provider
// and Model empty.
type Row struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Results  int    `json:"results"`
	OK       int    `json:"ok"`
	Degraded int    `json:"degraded"`
	Failed   int    `json:"failed"`
	// Latency is the processor's time for the request (result latency_ms);
	// EndToEnd is the client's, from publish to the result's arrival, and
	// includes the time queued.
	Latency  Quantiles `json:"latency_ms"`
	EndToEnd Quantiles `json:"end_to_end_ms"`

	position int // the best chain position seen, for ordering rows
}

// DegradedShare is the share of the row's answers that were degraded.
func (r Row) DegradedShare() float64 { return share(r.Degraded, r.OK) }

// Summary is what a run adds up to (docs/commands.md, publisher).
type Summary struct {
	Chain      string `json:"chain"`
	Requests   int    `json:"requests"` // in the run
	Sent       int    `json:"sent"`     // published
	Results    int    `json:"results"`  // arrived, ok or failed
	OK         int    `json:"ok"`
	Failed     int    `json:"failed"`     // results with status failed
	Missing    int    `json:"missing"`    // sent, but no result arrived
	Unsent     int    `json:"unsent"`     // never published
	Degraded   int    `json:"degraded"`   // ok results not from the chain's first provider
	Duplicates int    `json:"duplicates"` // taken by JetStream for requests sent earlier
	// Span runs from the first publish to the last result's arrival.
	Span       time.Duration `json:"-"`
	Latency    Quantiles     `json:"latency_ms"`    // of all results
	EndToEnd   Quantiles     `json:"end_to_end_ms"` // of all results
	Rows       []Row         `json:"-"`             // by chain position, then provider and model; failed last
	MissingIDs []string      `json:"-"`             // ids of the requests sent without a result
}

// Failures counts the requests that got no answer: failed results, missing
// results and requests never sent. A run with failures exits 1.
func (s Summary) Failures() int { return s.Failed + s.Missing + s.Unsent }

// DegradedShare is the share of ok answers that were degraded.
func (s Summary) DegradedShare() float64 { return share(s.Degraded, s.OK) }

func share(part, whole int) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// Summarize adds up the outcomes of a run on chainName.
func Summarize(chainName string, outcomes []client.Outcome) Summary {
	s := Summary{Chain: chainName, Requests: len(outcomes)}
	type key struct{ provider, model string }
	rows := map[key]*Row{}
	rowLat := map[key][]time.Duration{}
	rowE2E := map[key][]time.Duration{}
	var lat, e2e []time.Duration
	var first, last time.Time
	for _, o := range outcomes {
		if o.Published.IsZero() {
			s.Unsent++
			continue
		}
		s.Sent++
		if o.Duplicate {
			s.Duplicates++
		}
		if first.IsZero() || o.Published.Before(first) {
			first = o.Published
		}
		if !o.HasResult() {
			s.Missing++
			s.MissingIDs = append(s.MissingIDs, o.ID)
			continue
		}
		r := o.Result
		k := key{r.Provider, r.Model}
		if r.Status != chain.StatusOK {
			k = key{}
		}
		row := rows[k]
		if row == nil {
			row = &Row{Provider: k.provider, Model: k.model, position: math.MaxInt}
			rows[k] = row
		}
		s.Results++
		row.Results++
		if r.Status == chain.StatusOK {
			s.OK++
			row.OK++
			row.position = min(row.position, r.Position)
			if r.Degraded {
				s.Degraded++
				row.Degraded++
			}
		} else {
			s.Failed++
			row.Failed++
		}
		l := time.Duration(r.LatencyMs) * time.Millisecond
		lat = append(lat, l)
		rowLat[k] = append(rowLat[k], l)
		if d, ok := o.EndToEnd(); ok {
			e2e = append(e2e, d)
			rowE2E[k] = append(rowE2E[k], d)
			if o.Arrived.After(last) {
				last = o.Arrived
			}
		}
	}
	if !last.IsZero() {
		s.Span = last.Sub(first)
	}
	s.Latency, s.EndToEnd = QuantilesOf(lat), QuantilesOf(e2e)
	for k, row := range rows {
		row.Latency, row.EndToEnd = QuantilesOf(rowLat[k]), QuantilesOf(rowE2E[k])
		s.Rows = append(s.Rows, *row)
	}
	slices.SortFunc(s.Rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.position, b.position), strings.Compare(a.Provider, b.Provider), strings.Compare(a.Model, b.Model))
	})
	return s
}

// maxListedIDs bounds the ids WriteText lists; JSON lists them all.
const maxListedIDs = 10

// WriteText writes the summary as a heading and a table. The table has a
// row per provider and model, one for failed results, one for the requests
// sent without a result and one for those never sent, so that its REQUESTS
// column adds up to the run's requests and each count matches the heading:
// FAILED counts failed results only, as "failed" does.
func (s Summary) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "chain %s: %d requests, %d sent, %d results", text.Visible(s.Chain), s.Requests, s.Sent, s.Results)
	if s.Span > 0 {
		fmt.Fprintf(tw, " in %s (%.1f/s)", s.Span.Round(time.Millisecond), float64(s.Results)/s.Span.Seconds())
	}
	fmt.Fprintf(tw, "\nok %d, degraded %d (%s of ok), failed %d, no result %d, not sent %d\n",
		s.OK, s.Degraded, percent(s.DegradedShare()), s.Failed, s.Missing, s.Unsent)
	if s.Duplicates > 0 {
		fmt.Fprintf(tw, "%d request(s) repeated an id sent earlier: their results are the earlier ones\n", s.Duplicates)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "PROVIDER\tMODEL\tREQUESTS\tRESULTS\tOK\tDEGRADED\tFAILED\tLATENCY p50/p95/p99\tEND-TO-END p50/p95/p99")
	for _, r := range s.Rows {
		provider, model := text.Visible(r.Provider), text.Visible(r.Model)
		if r.Provider == "" {
			provider, model = "(failed)", "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\n", provider, model, r.Results, r.Results, r.OK,
			degradedCell(r.Degraded, r.OK), r.Failed, r.Latency, r.EndToEnd)
	}
	if s.Missing > 0 {
		fmt.Fprintf(tw, "(no result)\t-\t%d\t0\t0\t-\t0\t-\t-\n", s.Missing)
	}
	if s.Unsent > 0 {
		fmt.Fprintf(tw, "(not sent)\t-\t%d\t0\t0\t-\t0\t-\t-\n", s.Unsent)
	}
	fmt.Fprintf(tw, "TOTAL\t\t%d\t%d\t%d\t%s\t%d\t%s\t%s\n", s.Requests, s.Results, s.OK,
		degradedCell(s.Degraded, s.OK), s.Failed, s.Latency, s.EndToEnd)
	if len(s.MissingIDs) > 0 {
		ids := lo.Map(s.MissingIDs[:min(len(s.MissingIDs), maxListedIDs)], func(id string, _ int) string { return text.Visible(id) })
		fmt.Fprintf(tw, "\nno result for: %s", strings.Join(ids, ", "))
		if more := len(s.MissingIDs) - len(ids); more > 0 {
			fmt.Fprintf(tw, " … and %d more", more)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func degradedCell(degraded, ok int) string {
	if ok == 0 {
		return "-"
	}
	return fmt.Sprintf("%d (%s)", degraded, percent(share(degraded, ok)))
}

func percent(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }

// MarshalJSON adds the share of degraded answers, degraded_share.
func (r Row) MarshalJSON() ([]byte, error) {
	type fields Row // Row's fields, without this method
	return json.Marshal(struct {
		fields
		DegradedShare float64 `json:"degraded_share"`
	}{fields(r), r.DegradedShare()})
}

// MarshalJSON writes the summary with snake_case fields, durations in
// milliseconds and the derived counts spelled out; the lists are [] when
// empty.
func (s Summary) MarshalJSON() ([]byte, error) {
	type fields Summary // Summary's fields, without this method
	return json.Marshal(struct {
		fields
		DegradedShare float64  `json:"degraded_share"`
		Failures      int      `json:"failures"`
		SpanMs        int64    `json:"span_ms"`
		ByModel       []Row    `json:"by_model"`
		MissingIDs    []string `json:"missing_ids"`
	}{fields(s), s.DegradedShare(), s.Failures(), s.Span.Milliseconds(), append([]Row{}, s.Rows...), append([]string{}, s.MissingIDs...)})
}
