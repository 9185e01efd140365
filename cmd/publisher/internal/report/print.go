package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/samber/lo"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/client"
	"github.com/detourhq/detour/internal/text"
	"github.com/detourhq/detour/wire"
)

// PrintPublished reports a run that did not wait: how many requests went
// out to chainName and, with asJSON, their ids, so their results can be
// read later: {"published": n, "subject": …, "ids": […]}.
func PrintPublished(w io.Writer, chainName string, asJSON bool, outcomes []client.Outcome, sent int) {
	subject := wire.RequestSubject(chainName)
	if !asJSON {
		fmt.Fprintf(w, "published %d request(s) to %s\n", sent, text.Visible(subject))
		return
	}
	ids := lo.FilterMap(outcomes, func(o client.Outcome, _ int) (string, bool) { return o.ID, !o.Published.IsZero() })
	_ = json.NewEncoder(w).Encode(map[string]any{"published": sent, "subject": subject, "ids": ids})
}

// PrintMissing reports, for -json, the requests without a result, one line
// each; their results, if any, were printed as they arrived.
func PrintMissing(w io.Writer, outcomes []client.Outcome) {
	for _, o := range outcomes {
		if o.Err != nil {
			fmt.Fprintf(w, "publisher: %s: %s\n", text.Visible(o.ID), text.VisibleError(o.Err))
		}
	}
}

// PrintOutcomes prints each result as a block: a line
// `<id>  <status>  model=… provider=… degraded=… attempts=… latency=…ms`,
// then the answer or the error, indented.
func PrintOutcomes(w io.Writer, outcomes []client.Outcome) {
	for _, o := range outcomes {
		if o.Err != nil {
			fmt.Fprintf(w, "%s  no result: %s\n", text.Visible(o.ID), text.VisibleError(o.Err))
			continue
		}
		r := o.Result
		// A failed result has no model or provider: they are left out
		// rather than printed empty.
		var fields []string
		if r.Model != "" {
			fields = append(fields, "model="+text.Visible(r.Model))
		}
		if r.Provider != "" {
			fields = append(fields, "provider="+text.Visible(r.Provider))
		}
		fields = append(fields, fmt.Sprintf("degraded=%t attempts=%d latency=%dms", r.Degraded, len(r.Attempts), r.LatencyMs))
		fmt.Fprintf(w, "%s  %s  %s\n", text.Visible(r.ID), text.Visible(string(r.Status)), strings.Join(fields, " "))
		if r.Status == chain.StatusOK {
			// The answer is the model's text: its lines stay lines, but
			// nothing in it reaches the terminal as a control.
			fmt.Fprintf(w, "  %s\n", text.VisibleLines(r.Content))
		} else {
			fmt.Fprintf(w, "  error: %s\n", text.Visible(r.Error))
		}
	}
}
