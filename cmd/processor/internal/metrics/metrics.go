package metrics

import (
	"cmp"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/detourhq/detour/cache"
	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/stream"
)

var (
	_ stream.Observer = (*Metrics)(nil)
	_ cache.Observer  = (*Metrics)(nil)
)

// Metrics holds every collector detour exports, on its own registry.
type Metrics struct {
	registry        *prometheus.Registry
	requests        *prometheus.CounterVec
	providerCalls   *prometheus.CounterVec
	skips           *prometheus.CounterVec
	cooldownsOpened *prometheus.CounterVec
	callSeconds     *prometheus.HistogramVec
	requestSeconds  *prometheus.HistogramVec
	naks            *prometheus.CounterVec
	deadLetters     *prometheus.CounterVec
	inFlight        prometheus.Gauge
	cache           *prometheus.CounterVec
	tokens          *prometheus.CounterVec
	cost            *prometheus.CounterVec
	conflicts       *prometheus.GaugeVec
	fleet           *fleetCollector
	rates           rates
	models          modelLabels
	logger          atomic.Pointer[slog.Logger] // nil: slog.Default()
}

// latencyBuckets span a fast cache hit to a slow model call.
var latencyBuckets = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120}

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func histogram(name, help string, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets}, labels)
}

// New registers detour's collectors, plus the Go and process collectors, on
// a fresh registry.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: counter("detour_requests_total",
			fmt.Sprintf("Deliveries settled, by chain and outcome (%s).", list(stream.Outcomes())), "chain", "outcome"),
		providerCalls: counter("detour_provider_calls_total",
			"Provider attempts, by provider and failure class (\"ok\" for a valid answer).", "provider", "class"),
		skips: counter("detour_provider_skips_total", "Providers skipped without a call, by provider and reason.", "provider", "reason"),
		cooldownsOpened: counter("detour_cooldowns_opened_total",
			"Cooldowns this processor opened, by provider and failure class.", "provider", "class"),
		callSeconds:    histogram("detour_provider_call_seconds", "Duration of one provider attempt.", "provider"),
		requestSeconds: histogram("detour_request_seconds", "Time from a request's publication to its result.", "chain"),
		naks: counter("detour_naks_total",
			fmt.Sprintf("Deliveries handed back, by chain and reason (%s).", list(stream.NakReasons())), "chain", "reason"),
		deadLetters: counter("detour_dead_letters_total",
			fmt.Sprintf("Requests dead-lettered, by chain and reason (%s).", list(deadletter.Reasons())), "chain", "reason"),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "detour_in_flight", Help: "Deliveries being worked on now."}),
		cache: counter("detour_cache_total",
			"Requests of chains with a response cache, by chain and result (hit, miss, stale).", "chain", "result"),
		tokens: counter("detour_tokens_total", "Tokens of answered requests as the answering provider reported them, "+
			"by provider, model and kind (prompt, completion).", "provider", "model", "kind"),
		cost: counter("detour_cost_total", "Cost of answered requests at the chain file's price of the answering provider, "+
			"in the price's unit, by provider and model.", "provider", "model"),
		conflicts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "detour_config_conflicts",
			Help: "Names in conflict with another running processor, by kind: provider names it defines differently (type, base URL, model or policy), chain names it runs with different providers.",
		}, []string{"kind"}),
		fleet:  newFleetCollector(),
		models: modelLabels{seen: map[string]map[string]bool{}},
	}
	// Both kinds from the start, at 0, as an unlabelled gauge would be.
	m.conflicts.WithLabelValues("provider")
	m.conflicts.WithLabelValues("chain")
	m.registry.MustRegister(m.requests, m.providerCalls, m.skips, m.cooldownsOpened, m.callSeconds,
		m.requestSeconds, m.naks, m.deadLetters, m.inFlight, m.cache, m.tokens, m.cost, m.conflicts, m.fleet,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Settled counts a delivery's outcome.
func (m *Metrics) Settled(chainName string, outcome stream.Outcome) {
	if m != nil {
		m.requests.WithLabelValues(labelValue(chainName), string(outcome)).Inc()
	}
}

// Attempts counts a run's provider calls and skips and times each call.
func (m *Metrics) Attempts(attempts []chain.Attempt) {
	if m == nil {
		return
	}
	for _, a := range attempts {
		provider := labelValue(a.Provider)
		if a.Outcome == chain.OutcomeSkipped {
			m.skips.WithLabelValues(provider, a.Class.String()).Inc()
			continue
		}
		m.providerCalls.WithLabelValues(provider, cmp.Or(a.Class.String(), "ok")).Inc() // ClassNone's name is ""
		m.callSeconds.WithLabelValues(provider).Observe(float64(a.LatencyMs) / 1000)
	}
}

// Answered times a request from its publication to its result, and counts
// it at now for Rates.
func (m *Metrics) Answered(chainName string, sincePublished time.Duration, now time.Time, degraded bool) {
	if m != nil {
		m.requestSeconds.WithLabelValues(labelValue(chainName)).Observe(sincePublished.Seconds())
		m.rates.add(now, degraded)
	}
}

// Nak counts a delivery handed back for later.
func (m *Metrics) Nak(chainName string, reason stream.NakReason) {
	if m != nil {
		m.naks.WithLabelValues(labelValue(chainName), string(reason)).Inc()
	}
}

// DeadLetter counts a dead-lettered request.
func (m *Metrics) DeadLetter(chainName string, reason deadletter.Reason) {
	if m != nil {
		m.deadLetters.WithLabelValues(labelValue(chainName), labelValue(string(reason))).Inc()
	}
}

// CooldownOpened counts a cooldown this processor opened.
func (m *Metrics) CooldownOpened(provider string, class chain.Class) {
	if m != nil {
		m.cooldownsOpened.WithLabelValues(labelValue(provider), class.String()).Inc()
	}
}

// InFlight moves the in-flight gauge by delta.
func (m *Metrics) InFlight(delta int) {
	if m != nil {
		m.inFlight.Add(float64(delta))
	}
}

// Cache counts a request of a chain with a response cache.
func (m *Metrics) Cache(chainName string, result chain.CacheStatus) {
	if m != nil {
		m.cache.WithLabelValues(labelValue(chainName), labelValue(string(result))).Inc()
	}
}
