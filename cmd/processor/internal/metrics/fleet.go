package metrics

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/kvstate"
)

// StatusFunc returns one row per provider as the mirror sees it at now.
type StatusFunc func(now time.Time) []kvstate.ProviderStatus

// MaxOtherProviders bounds the providers reported besides the chain file's:
// anyone allowed to write the bucket can add a name, each two series on
// every /metrics and a row of every status page.
const MaxOtherProviders = 64

// ReportedProviders picks from rows, sorted by name, those /metrics and the
// status page report: every one of own (the chain file's providers and
// their circuits) and up to MaxOtherProviders others that are valid
// provider names or circuits of one. It returns them in order, and how
// many it left out.
func ReportedProviders(rows []kvstate.ProviderStatus, own []string) (kept []kvstate.ProviderStatus, omitted int) {
	kept = make([]kvstate.ProviderStatus, 0, min(len(rows), len(own)+MaxOtherProviders))
	others := 0
	for _, r := range rows {
		provider, _, circuit := kvstate.SplitCircuit(r.Provider)
		switch {
		case slices.Contains(own, r.Provider):
		case circuit && config.ValidName(provider) && others < MaxOtherProviders:
			others++
		default:
			omitted++
			continue
		}
		kept = append(kept, r)
	}
	return kept, omitted
}

// fleetCollector exports the mirror's view at scrape time, so that every
// processor reports every provider, not only what it did itself.
type fleetCollector struct {
	state, remaining, omitted *prometheus.Desc

	mu     sync.Mutex
	status StatusFunc
	own    []string
	now    func() time.Time
}

func newFleetCollector() *fleetCollector {
	return &fleetCollector{
		state: prometheus.NewDesc("detour_provider_state",
			"Circuit state of each provider as every processor sees it (0 closed, 1 open, 2 half-open).",
			[]string{"provider"}, nil),
		remaining: prometheus.NewDesc("detour_cooldown_remaining_seconds",
			"Seconds left in each provider's cooldown (0 when none runs).",
			[]string{"provider"}, nil),
		omitted: prometheus.NewDesc("detour_provider_names_omitted",
			fmt.Sprintf("Provider names with state in the provider bucket that detour_provider_state and the status page leave out: "+
				"not valid provider names, or past the first %d besides the chain file's own.", MaxOtherProviders),
			nil, nil),
		now: time.Now,
	}
}

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.remaining
	ch <- c.omitted
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	status, own, now := c.status, c.own, c.now()
	c.mu.Unlock()
	if status == nil {
		return
	}
	rows, omitted := ReportedProviders(status(now), own)
	for _, r := range rows {
		left := max(0, r.CooldownUntil.Sub(now).Seconds()) // 0 for none, or one past
		// A name the registry refuses costs its own series, not the scrape.
		state, errState := prometheus.NewConstMetric(c.state, prometheus.GaugeValue, float64(r.State), r.Provider)
		remaining, err := prometheus.NewConstMetric(c.remaining, prometheus.GaugeValue, left, r.Provider)
		if errState != nil || err != nil {
			omitted++
			continue
		}
		ch <- state
		ch <- remaining
	}
	ch <- prometheus.MustNewConstMetric(c.omitted, prometheus.GaugeValue, float64(omitted))
}

// ReportStates makes detour_provider_state and
// detour_cooldown_remaining_seconds read status at every scrape at now
// (nil: time.Now), for the providers ReportedProviders keeps with own.
func (m *Metrics) ReportStates(now func() time.Time, status StatusFunc, own ...string) {
	if m == nil {
		return
	}
	if now == nil {
		now = time.Now
	}
	m.fleet.mu.Lock()
	m.fleet.now, m.fleet.status, m.fleet.own = now, status, slices.Clone(own)
	m.fleet.mu.Unlock()
}
