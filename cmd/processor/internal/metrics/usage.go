package metrics

import (
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourhq/detour/chain"
)

// TokenKind is the kind label of detour_tokens_total.
type TokenKind string

// The kinds of tokens counted.
const (
	TokensPrompt     TokenKind = "prompt"
	TokensCompletion TokenKind = "completion"
)

func newUsageCollectors() (tokens, cost *prometheus.CounterVec) {
	tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "detour_tokens_total",
		Help: "Tokens of answered requests as the answering provider reported them, by provider, model and kind (prompt, completion).",
	}, []string{"provider", "model", "kind"})
	cost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "detour_cost_total",
		Help: "Cost of answered requests at the chain file's price of the answering provider, in the price's unit, by provider and model.",
	}, []string{"provider", "model"})
	return tokens, cost
}

// Usage counts the tokens and the cost of an answered request: one the
// chain answered, whether or not its result is stored yet, as the provider
// was paid either way. A failed result counts nothing, nor does an answer
// from the response cache (hit or stale), paid for when first given.
func (m *Metrics) Usage(res chain.Result) {
	if m == nil || res.Status != chain.StatusOK || res.Cache == chain.CacheHit || res.Cache == chain.CacheStale {
		return
	}
	// A counter panics on a negative value: the numbers come from outside.
	// Zero adds nothing, and is not worth a label lookup on every request
	// a rules provider answers.
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
	add(m.tokens, float64(res.Usage.PromptTokens), provider, model, string(TokensPrompt))
	add(m.tokens, float64(res.Usage.CompletionTokens), provider, model, string(TokensCompletion))
	if res.Cost != nil {
		add(m.cost, *res.Cost, provider, model)
	}
}

// maxModelsPerProvider bounds the model label values of one provider. The
// name comes from the provider's answer, and one that named a new model on
// every answer would grow the series, and the memory they hold, without
// bound; past it, a model not seen yet is counted as otherModel.
const maxModelsPerProvider = 32

// otherModel is the model label of the models past maxModelsPerProvider.
const otherModel = "other"

// modelLabels keeps the models each provider's series are labelled with.
type modelLabels struct {
	mu   sync.Mutex
	seen map[string]map[string]struct{} // provider → models
}

// label is the model label of an answer of provider naming model.
func (l *modelLabels) label(provider, model string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	models := l.seen[provider]
	if _, ok := models[model]; ok {
		return model
	}
	if len(models) >= maxModelsPerProvider {
		return otherModel
	}
	if models == nil {
		if l.seen == nil {
			l.seen = map[string]map[string]struct{}{}
		}
		models = map[string]struct{}{}
		l.seen[provider] = models
	}
	models[model] = struct{}{}
	return model
}

// ConfigConflicts sets detour_config_conflicts{kind="provider"}: the
// number of provider names that another running processor defines
// differently.
func (m *Metrics) ConfigConflicts(n int) {
	if m != nil {
		m.conflicts.WithLabelValues("provider").Set(float64(n))
	}
}

// ChainConflicts sets detour_config_conflicts{kind="chain"}: the number of
// chain names that another running processor runs with different
// providers.
func (m *Metrics) ChainConflicts(n int) {
	if m != nil {
		m.conflicts.WithLabelValues("chain").Set(float64(n))
	}
}
