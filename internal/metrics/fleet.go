package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourhq/detour/kvstate"
)

// StatusFunc returns one row per provider as the provider-state mirror sees
// it at now: the fleet's view, whichever processor wrote it.
type StatusFunc func(now time.Time) []kvstate.ProviderStatus

// fleetCollector exports the mirror's view at scrape time, so that every
// processor reports the state of every provider, not only what it did
// itself.
type fleetCollector struct {
	state, remaining *prometheus.Desc

	mu     sync.Mutex
	status StatusFunc
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
		now: time.Now,
	}
}

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.remaining
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	status, now := c.status, c.now()
	c.mu.Unlock()
	if status == nil {
		return
	}
	for _, r := range status(now) {
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, float64(r.State), r.Provider)
		left := 0.0
		if !r.CooldownUntil.IsZero() && r.CooldownUntil.After(now) {
			left = r.CooldownUntil.Sub(now).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, left, r.Provider)
	}
}

// ReportStates makes detour_provider_state and
// detour_cooldown_remaining_seconds read status at every scrape.
func (m *Metrics) ReportStates(status StatusFunc) {
	if m == nil {
		return
	}
	m.fleet.mu.Lock()
	m.fleet.status = status
	m.fleet.mu.Unlock()
}
