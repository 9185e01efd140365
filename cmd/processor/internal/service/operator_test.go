package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/cmd/processor/internal/metrics"
	"github.com/detourhq/detour/cmd/processor/internal/operator"
	"github.com/detourhq/detour/cmd/processor/internal/service"
	"github.com/detourhq/detour/cmd/processor/internal/statuspage"
	"github.com/detourhq/detour/kvstate"
)

// processorHeader names, in each provider call, the test processor that
// made it, so that a fake provider's Received list tells them apart.
const processorHeader = "X-Test-Processor"

// namedCalls sends each provider call with processorHeader set to name.
type namedCalls struct {
	name string
	next http.RoundTripper
}

func (n namedCalls) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(processorHeader, n.name)
	return n.next.RoundTrip(r)
}

// withName makes an assembled processor's provider calls say it made them.
func withName(name string) func(*service.Options) {
	return func(o *service.Options) {
		o.HTTPClient = &http.Client{Transport: namedCalls{name: name, next: http.DefaultTransport}}
	}
}

// callers is the set of test processors that made srv's calls from the
// n-th on.
func callers(srv *providertest.Server, from int) []string {
	var names []string
	for _, r := range srv.Received()[from:] {
		if n := r.Header.Get(processorHeader); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// publishBatch publishes n requests named prefix-1…n at once and returns
// their results.
func (h *harness) publishBatch(prefix string, n int) []chain.Result {
	h.t.Helper()
	for i := 1; i <= n; i++ {
		h.publish("default", request(fmt.Sprintf("%s-%d", prefix, i), "hello"))
	}
	out := make([]chain.Result, 0, n)
	for i := 1; i <= n; i++ {
		res, _ := h.waitResult(fmt.Sprintf("%s-%d", prefix, i), 20*time.Second)
		out = append(out, res)
	}
	return out
}

// statusJSON reads a processor's /status.json.
func statusJSON(t *testing.T, web string) statuspage.Snapshot {
	t.Helper()
	resp, err := http.Get(web + "status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var snap statuspage.Snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		t.Fatalf("status.json: %v\n%s", err, body)
	}
	return snap
}

// TestAnOperatorResetsAndTripsAProviderFleetWide is the new user's outage:
// a wrong API key's 401 puts primary in its hour-long auth cooldown on two
// processors. Once the key is fixed, `processor reset primary` (its code
// path, operator.Fleet.Reset) brings it back on both at once, with no hand
// deletion of keys: the next requests, taken by both processors, are
// answered by primary, whose server counts them. `processor trip primary
// -for 30s -reason maintenance` (operator.Fleet.Trip) then makes both skip
// it (class cooldown, no call reaches it), and the cooldown key and the
// status page name the operator and the reason; the page lists the reset
// and the trip as the operator's.
func TestAnOperatorResetsAndTripsAProviderFleetWide(t *testing.T) {
	// The first call meets the wrong key; the key is fixed after it. Calls
	// take a moment, so that a batch of requests keeps both processors'
	// workers busy and each takes some.
	primary := providertest.New(providertest.OpenAI, providertest.FailFirst(1, providertest.Status(401), providertest.Slow(100*time.Millisecond, providertest.OK())))
	defer primary.Close()
	backup := providertest.New(providertest.OpenAI, providertest.Slow(100*time.Millisecond, providertest.OK()))
	defer backup.Close()
	h := newHarness(t)
	yaml := fmt.Sprintf(`
providers:
  - {name: primary, type: openai, base_url: %s, model: m-primary, max_retries: 0, failure_threshold: 3, auth_cooldown: 1h}
  - {name: backup, type: openai, base_url: %s, model: m-backup}
chains:
  default: [primary, backup]
`, primary.URL, backup.URL)
	file := parseChainFile(t, yaml)
	var procs []*testProcessor
	for _, name := range []string{"a", "b"} {
		p := h.assemble(file, testSettings(), false, withName(name), withMetrics(metrics.New()))
		p.run()
		procs = append(procs, p)
	}
	web := httptestServer(t, procs[0].Processor)
	stores := func() map[string]*kvstate.Store {
		return map[string]*kvstate.Store{"a": procs[0].StoreForTest(), "b": procs[1].StoreForTest()}
	}

	h.publish("default", request("first", "hello"))
	if res, _ := h.waitResult("first", 10*time.Second); res.Provider != "backup" || primary.Requests() != 1 {
		t.Fatalf("first: answered by %q after %d calls to primary, want backup after the 401", res.Provider, primary.Requests())
	}
	for name, s := range stores() {
		eventually(t, 5*time.Second, name+" to see primary open", func() bool {
			until, cooling := s.Cooling("primary", time.Now())
			return cooling && time.Until(until) > 50*time.Minute
		})
	}

	fleet := operator.Fleet{JS: h.js, File: file, Path: "detour.yaml", By: "alice@ops-host"}
	ctx := context.Background()
	reset, err := fleet.Reset(ctx, []string{"primary"})
	if err != nil || len(reset) != 1 || !reset[0].Done || reset[0].Before.Cooldown == nil || reset[0].Before.Cooldown.Class != chain.ClassAuth {
		t.Fatalf("reset: %+v, %v; want the auth cooldown ended", reset, err)
	}
	for name, s := range stores() {
		eventually(t, 5*time.Second, name+" to see primary closed", func() bool {
			return s.State("primary", time.Now()) == kvstate.StateClosed
		})
	}
	before := primary.Requests()
	for _, res := range h.publishBatch("after-reset", 24) {
		if res.Status != chain.StatusOK || res.Provider != "primary" || res.Degraded {
			t.Fatalf("after the reset: %+v, want a first-choice answer from primary", res)
		}
	}
	if got := primary.Requests() - before; got != 24 {
		t.Errorf("primary counted %d calls after the reset, want 24", got)
	}
	if got := callers(primary, before); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("calls to primary after the reset came from %v, want both processors", got)
	}

	trip, err := fleet.Trip(ctx, "primary", 30*time.Second, "maintenance")
	if err != nil || !trip.Opened || !trip.HalfOpen {
		t.Fatalf("trip: %+v, %v", trip, err)
	}
	for name, s := range stores() {
		eventually(t, 5*time.Second, name+" to see primary open", func() bool {
			return s.State("primary", time.Now()) == kvstate.StateOpen
		})
	}
	before, backupBefore := primary.Requests(), len(backup.Received())
	for _, res := range h.publishBatch("in-maintenance", 24) {
		if res.Provider != "backup" || len(res.Attempts) == 0 || res.Attempts[0].Provider != "primary" || res.Attempts[0].Class != chain.ClassCooldown {
			t.Fatalf("during the operator's cooldown: %+v, want primary skipped (cooldown), backup answering", res)
		}
	}
	if got := primary.Requests() - before; got != 0 {
		t.Errorf("primary counted %d calls during the operator's cooldown, want none", got)
	}
	if got := callers(backup, backupBefore); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("during the operator's cooldown backup was called by %v, want both processors", got)
	}
	c, ok := mirroredCooldown(procs[1].StoreForTest(), "primary")
	if !ok || !c.Operator || c.By != "alice@ops-host" || c.Reason != "maintenance" || c.DurationS != 30 {
		t.Errorf("cooldown key %+v, want the operator's, with the reason", c)
	}

	snap := statusJSON(t, web)
	var row *statuspage.Provider
	for i := range snap.Providers {
		if snap.Providers[i].Provider == "primary" {
			row = &snap.Providers[i]
		}
	}
	if row == nil || row.State != kvstate.StateOpen || row.Cooldown == nil || !row.Cooldown.Operator || row.Cooldown.By != "alice@ops-host" ||
		row.Cooldown.Reason != "maintenance" || row.RemainingS <= 0 || row.RemainingS > 30 || row.ResetBy != "alice@ops-host" ||
		!strings.HasPrefix(row.Operator, "tripped by operator alice@ops-host until ") || !strings.HasSuffix(row.Operator, ": maintenance") {
		t.Errorf("status page row of primary %+v", row)
	}
	eventually(t, 5*time.Second, "the status page to list the reset and the trip", func() bool {
		var kinds []kvstate.EventKind
		for _, e := range statusJSON(t, web).Events {
			switch {
			case e.Kind == kvstate.EventReset && e.By == "alice@ops-host":
				kinds = append(kinds, e.Kind)
			case e.Kind == kvstate.EventOpened && e.Cooldown.Operator && e.Cooldown.Reason == "maintenance":
				kinds = append(kinds, e.Kind)
			}
		}
		return slices.Equal(kinds, []kvstate.EventKind{kvstate.EventReset, kvstate.EventOpened})
	})
}
