package metrics

import (
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

// New registers detour's collectors, plus the Go and process collectors, on
// a fresh registry.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "detour_requests_total",
			Help: fmt.Sprintf("Deliveries settled, by chain and outcome (%s).", list(stream.Outcomes())),
		}, []string{"chain", "outcome"}),
		providerCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "detour_provider_calls_total",
			Help: "Provider attempts, by provider and failure class (\"ok\" for a valid answer).",
		}, []string{"provider", "class"}),
		skips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "detour_provider_skips_total",
			Help: "Providers skipped without a call, by provider and reason.",
		}, []string{"provider", "reason"}),
		cooldownsOpened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "detour_cooldowns_opened_total",
			Help: "Cooldowns this processor opened, by provider and failure class.",
		}, []string{"provider", "class"}),
		callSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "detour_provider_call_seconds",
			Help:    "Duration of one provider attempt.",
			Buckets: latencyBuckets,
		}, []string{"provider"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "detour_request_seconds",
			Help:    "Time from a request's publication to its result.",
			Buckets: latencyBuckets,
		}, []string{"chain"}),
		naks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "detour_naks_total",
			Help: fmt.Sprintf("Deliveries handed back, by chain and reason (%s).", list(stream.NakReasons())),
		}, []string{"chain", "reason"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "detour_dead_letters_total",
			Help: fmt.Sprintf("Requests dead-lettered, by chain and reason (%s).", list(deadletter.Reasons())),
		}, []string{"chain", "reason"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "detour_in_flight",
			Help: "Deliveries being worked on now.",
		}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "detour_cache_total",
			Help: "Requests of chains with a response cache, by chain and result (hit, miss, stale).",
		}, []string{"chain", "result"}),
		conflicts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "detour_config_conflicts",
			Help: "Names in conflict with another running processor, by kind: provider names it defines differently (type, base URL, model or policy), chain names it runs with different providers.",
		}, []string{"kind"}),
		fleet: newFleetCollector(),
	}
	// Both kinds from the start, at 0, as an unlabelled gauge would be.
	m.conflicts.WithLabelValues("provider")
	m.conflicts.WithLabelValues("chain")
	m.tokens, m.cost = newUsageCollectors()
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
		class := a.Class.String()
		if a.Class == chain.ClassNone {
			class = "ok"
		}
		m.providerCalls.WithLabelValues(provider, class).Inc()
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
