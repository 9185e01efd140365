package statuspage

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"time"

	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/cmd/processor/internal/metrics"
	"github.com/detourhq/detour/kvstate"
)

//go:embed page.html
var page []byte

// Snapshot is what /status.json serves: the page's data at one moment.
type Snapshot struct {
	// Now is the server's clock, so the page counts down from it rather
	// than from a phone's clock that may be off.
	Now       time.Time  `json:"now"`
	Processor string     `json:"processor"`
	Providers []Provider `json:"providers"`
	// Events are the latest outage events, newest last.
	Events []kvstate.Event `json:"events"`
	// PerSecond is answers per second over the last minute.
	PerSecond float64 `json:"requests_per_second"`
	// DegradedShare is the share (0 to 1) of those answers that were
	// degraded.
	DegradedShare float64 `json:"degraded_share"`
	// Conflicts are the provider names that this processor and another
	// define differently, each definition with its circuit;
	// ChainConflicts the chain names they run with different providers.
	Conflicts      []fleet.Conflict      `json:"conflicts"`
	ChainConflicts []fleet.ChainConflict `json:"chain_conflicts"`
}

// Provider is one row of the page.
type Provider struct {
	kvstate.ProviderStatus
	// RemainingS is the time left in the cooldown at Now, in seconds (0
	// when none runs).
	RemainingS float64 `json:"cooldown_remaining_s"`
	// Operator tells an operator's cooldown while it runs, or their last
	// reset while nothing failed since (kvstate.ProviderStatus.OperatorNote);
	// empty when neither.
	Operator string `json:"operator,omitempty"`
}

// Rows turns status rows into the page's, with the time left at now: those
// of the providers that /metrics reports too (metrics.ReportedProviders),
// every one of own, the chain file's, and a bounded number of others.
func Rows(now time.Time, rows []kvstate.ProviderStatus, own ...string) []Provider {
	rows, _ = metrics.ReportedProviders(rows, own)
	out := make([]Provider, len(rows))
	for i, r := range rows {
		out[i] = Provider{ProviderStatus: r, Operator: r.OperatorNote(), RemainingS: max(0, r.CooldownUntil.Sub(now).Seconds())}
	}
	return out
}

// Handler serves the page on "GET /" and its data, from snapshot, on
// "GET /status.json". Mount it on a mux for those two patterns.
func Handler(snapshot func() Snapshot) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
		_, _ = w.Write(page)
	})
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, _ *http.Request) {
		// The lists are [] when empty, never null.
		s := snapshot()
		s.Providers = append([]Provider{}, s.Providers...)
		s.Events = append([]kvstate.Event{}, s.Events...)
		s.Conflicts = append([]fleet.Conflict{}, s.Conflicts...)
		s.ChainConflicts = append([]fleet.ChainConflict{}, s.ChainConflicts...)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(s)
	})
	return mux
}
