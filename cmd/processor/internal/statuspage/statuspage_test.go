package statuspage_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/cmd/processor/internal/metrics"
	"github.com/detourhq/detour/cmd/processor/internal/statuspage"
	"github.com/detourhq/detour/kvstate"
)

// TestHandler serves the page on / only, and the snapshot, with the time
// left in each cooldown, on /status.json.
func TestHandler(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rows := []kvstate.ProviderStatus{
		{Provider: "a", State: kvstate.StateOpen, CooldownUntil: now.Add(90 * time.Second), ConsecutiveFailures: 3, Trips: 2, LastError: "<b>HTTP 500</b>"},
		{Provider: "b"},
	}
	h := statuspage.Handler(func() statuspage.Snapshot {
		return statuspage.Snapshot{Now: now, Providers: statuspage.Rows(now, rows), PerSecond: 1.5, DegradedShare: 0.25}
	})
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	page := get("/")
	if page.Code != http.StatusOK || !strings.HasPrefix(page.Header().Get("Content-Type"), "text/html") ||
		!strings.Contains(page.Body.String(), `<meta name="viewport"`) {
		t.Errorf("/: %d %s", page.Code, page.Header().Get("Content-Type"))
	}
	// The page writes provider data as text, never as markup.
	if strings.Contains(page.Body.String(), "innerHTML") {
		t.Error("the page uses innerHTML")
	}
	if rec := get("/nothing"); rec.Code != http.StatusNotFound {
		t.Errorf("/nothing: %d, want 404", rec.Code)
	}
	rec := get("/status.json")
	var s struct {
		Providers []struct {
			Provider   string  `json:"provider"`
			State      string  `json:"state"`
			RemainingS float64 `json:"cooldown_remaining_s"`
		} `json:"providers"`
		Events    []any   `json:"events"`
		PerSecond float64 `json:"requests_per_second"`
		Degraded  float64 `json:"degraded_share"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	if len(s.Providers) != 2 || s.Providers[0].State != "open" || s.Providers[0].RemainingS != 90 || s.Providers[1].RemainingS != 0 {
		t.Errorf("providers %+v", s.Providers)
	}
	if s.Events == nil || s.PerSecond != 1.5 || s.Degraded != 0.25 {
		t.Errorf("events %v (want [] not null), %v/s, %v degraded", s.Events, s.PerSecond, s.Degraded)
	}
}

// TestEventsKeepsTheLatest drops the oldest events beyond the limit.
func TestEventsKeepsTheLatest(t *testing.T) {
	e := statuspage.NewEvents(3)
	for _, p := range []string{"a", "b", "c", "d", "e"} {
		e.Add(kvstate.Event{Provider: p})
	}
	got := e.Latest()
	if len(got) != 3 || got[0].Provider != "c" || got[2].Provider != "e" {
		t.Errorf("Latest() = %v, want c, d, e", got)
	}
}

// TestRowsBoundTheProviders: the page lists the providers /metrics
// reports: every one of the chain file, and of the other names in the
// bucket only valid provider names, up to metrics.MaxOtherProviders in
// name order.
func TestRowsBoundTheProviders(t *testing.T) {
	var rows []kvstate.ProviderStatus
	for i := range metrics.MaxOtherProviders + 10 {
		rows = append(rows, kvstate.ProviderStatus{Provider: fmt.Sprintf("p%03d", i)})
	}
	rows = append(rows, kvstate.ProviderStatus{Provider: "x\xff"}, kvstate.ProviderStatus{Provider: "zz-own"})
	got := statuspage.Rows(time.Now(), rows, "zz-own")
	if len(got) != metrics.MaxOtherProviders+1 {
		t.Fatalf("%d rows, want %d others and the chain file's one", len(got), metrics.MaxOtherProviders)
	}
	if last := got[len(got)-1].Provider; last != "zz-own" {
		t.Errorf("last row %q, want the chain file's zz-own", last)
	}
	if p := got[metrics.MaxOtherProviders-1].Provider; p != fmt.Sprintf("p%03d", metrics.MaxOtherProviders-1) {
		t.Errorf("last other row %q, want the first %d by name", p, metrics.MaxOtherProviders)
	}
}

// TestRowsTellTheOperatorsActs: a row says whose cooldown it is when an
// operator tripped the provider, and who reset it while nothing failed
// since; a processor's cooldown, and a reset followed by failures, say
// nothing.
func TestRowsTellTheOperatorsActs(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rows := statuspage.Rows(now, []kvstate.ProviderStatus{
		{Provider: "a", State: kvstate.StateOpen, CooldownUntil: now.Add(time.Minute),
			Cooldown: &kvstate.Cooldown{Until: now.Add(time.Minute), DurationS: 60, Reason: "maintenance", By: "alice@host", Operator: true}},
		{Provider: "b", State: kvstate.StateClosed, ResetAt: now.Add(-time.Minute), ResetBy: "bob@host"},
		{Provider: "c", State: kvstate.StateOpen, CooldownUntil: now.Add(time.Minute), Cooldown: &kvstate.Cooldown{Until: now.Add(time.Minute), By: "proc-1"}},
		{Provider: "d", State: kvstate.StateClosed, ResetAt: now.Add(-time.Minute), ResetBy: "bob@host", ConsecutiveFailures: 1, LastFailure: now},
	})
	want := []string{"tripped by operator alice@host until 2026-01-02T03:05:05Z: maintenance", "reset by operator bob@host at 2026-01-02T03:03:05Z", "", ""}
	for i, r := range rows {
		if r.Operator != want[i] {
			t.Errorf("%s: operator %q, want %q", r.Provider, r.Operator, want[i])
		}
	}
}
