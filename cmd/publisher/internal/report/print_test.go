package report_test

import (
	"bytes"
	"testing"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/client"
	"github.com/detourhq/detour/cmd/publisher/internal/report"
	"github.com/detourhq/detour/internal/text/texttest"
)

// TestPrintOutcomes: a single result prints as a block; a failed one has no
// model or provider, and leaves them out instead of printing them empty.
func TestPrintOutcomes(t *testing.T) {
	var out bytes.Buffer
	report.PrintOutcomes(&out, []client.Outcome{
		{Receipt: client.Receipt{ID: "q1"}, Result: chain.Result{ID: "q1", Status: chain.StatusOK, Content: "Hello.", Model: "gpt-4o", Provider: "primary",
			Attempts: []chain.Attempt{{}}, LatencyMs: 412}},
		{Receipt: client.Receipt{ID: "q2"}, Result: chain.Result{ID: "q2", Status: chain.StatusFailed, Error: "every provider failed",
			Attempts: []chain.Attempt{{}, {}}, LatencyMs: 12}},
		{Receipt: client.Receipt{ID: "q3"}, Err: client.ErrNoResult},
	})
	want := "q1  ok  model=gpt-4o provider=primary degraded=false attempts=1 latency=412ms\n" +
		"  Hello.\n" +
		"q2  failed  degraded=false attempts=2 latency=12ms\n" +
		"  error: every provider failed\n" +
		"q3  no result: " + client.ErrNoResult.Error() + "\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestPrintOutcomesShowsControlsAsEscapes: the fields of a result, which
// any client that can publish to the reply subject can forge, are printed
// as escapes, and a missing result's id too.
func TestPrintOutcomesShowsControlsAsEscapes(t *testing.T) {
	var out bytes.Buffer
	report.PrintOutcomes(&out, []client.Outcome{
		{Receipt: client.Receipt{ID: "q1"}, Result: chain.Result{ID: "q1\x1b[2J", Status: "ok\r", Content: "a", Model: "m\x1b]0;t\a", Provider: "p\n"}},
		{Receipt: client.Receipt{ID: "q2\x1b[8m"}, Err: client.ErrNoResult},
	})
	texttest.AssertVisible(t, out.String())
	want := `q1\x1b[2J  ok\r  model=m\x1b]0;t\a provider=p\n degraded=false attempts=0 latency=0ms` + "\n" +
		"  error: \n" +
		`q2\x1b[8m  no result: ` + client.ErrNoResult.Error() + "\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
}
