package metrics

import (
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourhq/detour/chain"
)

// Usage counts the tokens and the cost of an answer, stored yet or not, as
// the provider was paid either way; not a failed result, nor an answer from
// the response cache, paid for when first given.
func (m *Metrics) Usage(res chain.Result) {
	if m == nil || res.Status != chain.StatusOK || res.Cache == chain.CacheHit || res.Cache == chain.CacheStale {
		return
	}
	// A counter panics on a negative value, and these come from outside.
	add := func(vec *prometheus.CounterVec, v float64, labels ...string) {
		if v > 0 && !math.IsInf(v, 0) {
			vec.WithLabelValues(labels...).Add(v)
		}
	}
	if res.Usage.PromptTokens <= 0 && res.Usage.CompletionTokens <= 0 && (res.Cost == nil || *res.Cost <= 0) {
		return // nothing to add, and no model to take a label for
	}
	provider := labelValue(res.Provider)
	model := m.models.label(provider, labelValue(res.Model))
	add(m.tokens, float64(res.Usage.PromptTokens), provider, model, "prompt")
	add(m.tokens, float64(res.Usage.CompletionTokens), provider, model, "completion")
	if res.Cost != nil {
		add(m.cost, *res.Cost, provider, model)
	}
}

// maxModelsPerProvider bounds the model labels of one provider: a model
// name comes from its answers, and a new one each time would grow the
// series without bound. Models past it are counted as otherModel.
const (
	maxModelsPerProvider = 32
	otherModel           = "other"
)

// modelLabels keeps the models each provider's series are labelled with.
type modelLabels struct {
	mu   sync.Mutex
	seen map[string]map[string]bool // provider → models; made by New
}

// label is the model label of an answer of provider naming model.
func (l *modelLabels) label(provider, model string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	models := l.seen[provider]
	switch {
	case models[model]:
	case len(models) >= maxModelsPerProvider:
		return otherModel
	case models == nil:
		l.seen[provider] = map[string]bool{model: true}
	default:
		models[model] = true
	}
	return model
}

// ConfigConflicts sets detour_config_conflicts: kind="provider" to
// providers, kind="chain" to chains.
func (m *Metrics) ConfigConflicts(providers, chains int) {
	if m != nil {
		m.conflicts.WithLabelValues("provider").Set(float64(providers))
		m.conflicts.WithLabelValues("chain").Set(float64(chains))
	}
}
