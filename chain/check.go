package chain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/detourhq/detour/internal/text"
)

// CheckResult is one provider's answer to one sample of a check.
type CheckResult struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Sample is the sample's request ID, else "#N" (from 1, in order).
	Sample    string `json:"sample"`
	OK        bool   `json:"ok"`
	Class     Class  `json:"class,omitzero"`
	Status    int    `json:"status_code,omitempty"`
	Error     string `json:"error,omitempty"`
	LatencyMs int64  `json:"latency_ms"`
}

// Check sends every sample to every step's provider once (no retries,
// state or fallback) and validates each answer as a chain would.
func Check(ctx context.Context, steps []Step, samples []Request) []CheckResult {
	var out []CheckResult
	for _, step := range steps {
		p := step.Provider
		for i, req := range samples {
			r := CheckResult{Provider: p.Name(), Model: p.Model(), Sample: cmp.Or(req.ID, fmt.Sprintf("#%d", i+1))}
			start := time.Now()
			var resp Response
			err := callOnce(ctx, &step, &req, &resp)
			r.LatencyMs = time.Since(start).Milliseconds()
			if err == nil {
				if problem := validate(&resp, req.Schema); problem != nil {
					err = &CallError{Class: ClassInvalidOutput, Err: problem}
				}
			}
			r.OK = err == nil
			if err != nil {
				ce := asCallError(err, ctx)
				r.Class, r.Status, r.Error = ce.Class, ce.StatusCode, ce.Error()
			}
			out = append(out, r)
		}
	}
	return out
}

// ErrCheckFailed is returned by WriteCheck when any sample failed.
var ErrCheckFailed = errors.New("chain: check failed")

// WriteCheck prints results as a provider × sample table, then the
// failures in full, and returns ErrCheckFailed if there was any. samples is
// the number of samples each provider answered.
func WriteCheck(w io.Writer, results []CheckResult, samples int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := []string{"PROVIDER", "MODEL"}
	// Samples and errors are outside text: no control reaches the terminal.
	for _, r := range results[:min(samples, len(results))] {
		header = append(header, text.Visible(r.Sample))
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	var failures []CheckResult
	for i := 0; i < len(results); i += samples {
		row := results[i:min(i+samples, len(results))]
		cells := []string{text.Visible(row[0].Provider), text.Visible(row[0].Model)}
		for _, r := range row {
			if r.OK {
				cells = append(cells, fmt.Sprintf("ok %dms", r.LatencyMs))
				continue
			}
			failures = append(failures, r)
			cells = append(cells, "FAIL "+r.Class.String())
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range failures {
		fmt.Fprintf(w, "%s on %s: %s\n", text.Visible(f.Provider), text.Visible(f.Sample), text.Visible(f.Error))
	}
	if len(failures) > 0 {
		return fmt.Errorf("%w: %d of %d answers", ErrCheckFailed, len(failures), len(results))
	}
	return nil
}
