package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/client"
	"github.com/detourhq/detour/cmd/internal/requestfile"
	"github.com/detourhq/detour/cmd/publisher/internal/report"
	"github.com/detourhq/detour/wire"
)

// degradingChain is primary then backup, with one attempt each and no
// cooldowns, so exactly the requests whose primary call fails are degraded.
func degradingChain(primaryURL, backupURL string) string {
	return fmt.Sprintf(`
providers:
  - {name: primary, type: openai, base_url: %s, model: primary-model, max_retries: 0, failure_threshold: 0}
  - {name: backup, type: openai, base_url: %s, model: backup-model, max_retries: 0}
chains:
  default: [primary, backup]
`, primaryURL, backupURL)
}

// newClient connects a client to the server at url until the test ends.
func newClient(t *testing.T, url string) *client.Client {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// request builds a one-message request.
func request(id, prompt string) wire.Request {
	return wire.Request{ID: id, Messages: []chain.Message{{Role: "user", Content: prompt}}}
}

// writeRequests writes n requests as JSON Lines, odd lines with messages and
// even ones with the prompt convenience, and reads them back as the
// publisher does.
func writeRequests(t *testing.T, n int) []wire.Request {
	t.Helper()
	var b strings.Builder
	for i := range n {
		if i%2 == 0 {
			fmt.Fprintf(&b, `{"id":"bulk-%02d","messages":[{"role":"user","content":"question %d"}],"metadata":{"n":"%d"}}`+"\n", i, i, i)
		} else {
			fmt.Fprintf(&b, `{"id":"bulk-%02d","prompt":"question %d"}`+"\n", i, i)
		}
	}
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reqs, err := requestfile.Read(f, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

// TestPublisherBulkRunSummarisesDegradedAnswers is the publisher's load
// generator against a processor: 50 requests from a file at 100/s on a chain
// whose primary fails its first 10 calls. Every request gets a result, the
// summary says 40 came from primary and 10 degraded ones from backup, and
// the publishes were spread at the asked rate.
func TestPublisherBulkRunSummarisesDegradedAnswers(t *testing.T) {
	const n, failing, rate = 50, 10, 100.0
	primary := providertest.New(providertest.OpenAI, providertest.FailFirst(failing, providertest.Status(http.StatusInternalServerError), providertest.OK()))
	defer primary.Close()
	backup := providertest.New(providertest.OpenAI, providertest.OK())
	defer backup.Close()
	c := newClient(t, startProcessor(t, degradingChain(primary.URL, backup.URL)))
	var published, results atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	outcomes, err := c.PublishAll(ctx, "default", writeRequests(t, n), client.Options{
		Wait: true, Rate: rate, Timeout: 30 * time.Second,
		OnPublished: func(client.Outcome) { published.Add(1) },
		OnResult:    func(client.Outcome) { results.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}

	for i, o := range outcomes {
		want := fmt.Sprintf("bulk-%02d", i)
		if o.ID != want || o.Err != nil || o.Result.ID != want || o.Result.Status != chain.StatusOK {
			t.Fatalf("outcome %d: id %s err %v result %s %s; want %s answered", i, o.ID, o.Err, o.Result.ID, o.Result.Status, want)
		}
		if d, ok := o.EndToEnd(); !ok || d <= 0 {
			t.Errorf("outcome %s has no end-to-end time", o.ID)
		}
		if i%2 == 0 && o.Result.Metadata["n"] != fmt.Sprint(i) {
			t.Errorf("outcome %s metadata %v; want it echoed", o.ID, o.Result.Metadata)
		}
	}
	if published.Load() != n || results.Load() != n {
		t.Errorf("callbacks: %d published, %d results; want %d each", published.Load(), results.Load(), n)
	}
	// The 50th publish is due 49 intervals after the first.
	if spread := outcomes[n-1].Published.Sub(outcomes[0].Published); spread < time.Duration(float64(n-1)/rate*float64(time.Second))-5*time.Millisecond {
		t.Errorf("50 publishes at %v/s spread over %s; want about %s", rate, spread, time.Duration(float64(n-1)/rate*float64(time.Second)))
	}

	s := report.Summarize("default", outcomes)
	var text strings.Builder
	_ = s.WriteText(&text)
	t.Logf("summary:\n%s", text.String())
	if s.Requests != n || s.Sent != n || s.Results != n || s.OK != n || s.Failed != 0 || s.Missing != 0 ||
		s.Unsent != 0 || s.Failures() != 0 || s.Degraded != failing || s.DegradedShare() != float64(failing)/n {
		t.Errorf("summary %+v; want %d ok of which %d degraded, no failures", s, n, failing)
	}
	if s.Latency.N != n || s.EndToEnd.N != n || s.EndToEnd.P50 > s.EndToEnd.P99 || s.EndToEnd.P99 <= 0 {
		t.Errorf("latency %+v, end-to-end %+v; want %d of each, ordered", s.Latency, s.EndToEnd, n)
	}
	type row struct {
		provider, model           string
		results, ok, degraded, fl int
	}
	var rows []row
	for _, r := range s.Rows {
		rows = append(rows, row{r.Provider, r.Model, r.Results, r.OK, r.Degraded, r.Failed})
	}
	wantRows := []row{{"primary", "primary-model", n - failing, n - failing, 0, 0}, {"backup", "backup-model", failing, failing, failing, 0}}
	if fmt.Sprint(rows) != fmt.Sprint(wantRows) {
		t.Errorf("rows %v, want %v", rows, wantRows)
	}
	if primary.Requests() != n || backup.Requests() != failing {
		t.Errorf("provider calls: primary %d, backup %d; want %d and %d", primary.Requests(), backup.Requests(), n, failing)
	}

	// The same file again within the duplicate window: JetStream drops every
	// publish, no provider is called, and the run reads the earlier results
	// back from DETOUR_RESULTS instead of waiting for its timeout.
	start := time.Now()
	again, err := c.PublishAll(ctx, "default", writeRequests(t, n), client.Options{Wait: true, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s2 := report.Summarize("default", again)
	if s2.Duplicates != n || s2.OK != n || s2.Degraded != failing || s2.Failures() != 0 || s2.EndToEnd.N != 0 {
		t.Errorf("repeat summary %+v; want %d duplicates answered by the earlier results", s2, n)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("repeat run took %s; want the stored results read back at once", took)
	}
	if primary.Requests() != n || backup.Requests() != failing {
		t.Errorf("repeat run called providers: primary %d, backup %d", primary.Requests(), backup.Requests())
	}
}

// TestPublisherCountsFailedAndMissingResults runs four requests: one
// answered, one past its deadline and one with a reply subject outside the
// processor's prefixes (both dead-lettered, with a failed result stored
// under their ids), and one whose provider never answers within the wait.
// The summary counts two failures and one missing result.
func TestPublisherCountsFailedAndMissingResults(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, func(n int, req providertest.Request) providertest.Reply {
		if last := req.Messages[len(req.Messages)-1]; last.Content == "never mind" {
			return providertest.Reply{Hang: true}
		}
		return providertest.OK()(n, req)
	})
	defer solo.Close()
	c := newClient(t, startProcessor(t, soloChain(solo.URL)))
	reqs := []wire.Request{
		request("fine", "hello"),
		request("late", "hello"),
		request("refused", "hello"),
		request("lost", "never mind"),
	}
	reqs[1].Deadline = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	reqs[2].ReplyTo = "elsewhere.reply"
	var file strings.Builder
	for _, r := range reqs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		file.Write(append(line, '\n'))
	}
	if _, err := requestfile.Read(strings.NewReader(file.String()), "reqs.jsonl", nil); err != nil {
		t.Fatalf("client refuses a request: %v", err)
	}
	outcomes, err := c.PublishAll(context.Background(), "default", reqs, client.Options{Wait: true, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := report.Summarize("default", outcomes)
	if s.OK != 1 || s.Failed != 2 || s.Missing != 1 || s.Failures() != 3 || fmt.Sprint(s.MissingIDs) != "[lost]" {
		t.Fatalf("summary %+v; want 1 ok, 2 failed, 1 missing (lost)", s)
	}
	if o := outcomes[2]; !o.HasResult() || !strings.HasPrefix(o.Result.Error, "bad_reply_subject: ") {
		t.Errorf("refused request outcome %+v; want a failed result saying bad_reply_subject", o)
	}
	if o := outcomes[3]; o.HasResult() || !errors.Is(o.Err, client.ErrNoResult) {
		t.Errorf("lost request outcome %+v; want ErrNoResult", o)
	}
	if len(s.Rows) != 2 || s.Rows[1].Provider != "" || s.Rows[1].Failed != 2 {
		t.Errorf("rows %+v; want solo then the failed row", s.Rows)
	}
}

// TestPublisherStopEndsSendingNotWaiting: closing Options.Stop (the
// publisher's first interrupt) leaves the rest of the requests unsent, while
// the results of those already sent are still collected.
func TestPublisherStopEndsSendingNotWaiting(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.Slow(200*time.Millisecond, providertest.OK()))
	defer solo.Close()
	c := newClient(t, startProcessor(t, soloChain(solo.URL)))
	stop := make(chan struct{})
	var published int
	outcomes, err := c.PublishAll(context.Background(), "default", writeRequests(t, 20), client.Options{
		Wait: true, Rate: 50, Timeout: 20 * time.Second, Stop: stop,
		OnPublished: func(client.Outcome) {
			if published++; published == 5 {
				close(stop)
			}
		},
	})
	if err != nil {
		t.Fatalf("stopping is not an error: %v", err)
	}
	s := report.Summarize("default", outcomes)
	if s.Sent != 5 || s.OK != 5 || s.Missing != 0 || s.Unsent != 15 || s.Failures() != 15 {
		t.Fatalf("summary %+v; want 5 sent and answered, 15 not sent", s)
	}
	if o := outcomes[19]; !errors.Is(o.Err, client.ErrNotPublished) || !errors.Is(o.Err, client.ErrStopped) {
		t.Errorf("unsent outcome error %v; want ErrNotPublished and ErrStopped", o.Err)
	}
}
