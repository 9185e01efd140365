package service_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/cmd/processor/internal/metrics"
	"github.com/detourhq/detour/cmd/processor/internal/service"
	"github.com/detourhq/detour/kvstate"
)

// withMetrics gives an assembled processor its own metrics.
func withMetrics(m *metrics.Metrics) func(*service.Options) {
	return func(o *service.Options) { o.Metrics = m }
}

// TestStateGaugeShowsAnotherProcessorsCooldown: the state gauge comes from
// the mirror, so a processor that never called the dead provider reports
// it open, with the time left in its cooldown.
func TestStateGaugeShowsAnotherProcessorsCooldown(t *testing.T) {
	dead := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer dead.Close()
	backup := providertest.New(providertest.OpenAI, providertest.OK())
	defer backup.Close()
	h := newHarness(t)
	file := parseChainFile(t, outageChain(dead.URL, backup.URL, 3))
	opener := h.buildProcessor(file, testSettings())
	watcherMetrics := metrics.New()
	// Built, never run: it takes no request, but its mirror follows.
	h.assemble(file, testSettings(), true, withMetrics(watcherMetrics))
	if got := gathered(t, watcherMetrics, "detour_provider_state", "provider", "dead"); got != 0 {
		t.Fatalf("before the outage: state %v, want 0 (closed)", got)
	}
	opener.run()
	h.publish("default", request("g1", "hello"))
	if res, _ := h.waitResult("g1", 10*time.Second); res.Provider != "backup" {
		t.Fatalf("answered by %q, want backup", res.Provider)
	}
	eventually(t, 5*time.Second, "the other processor reports dead open", func() bool {
		return gathered(t, watcherMetrics, "detour_provider_state", "provider", "dead") == 1
	})
	left := gathered(t, watcherMetrics, "detour_cooldown_remaining_seconds", "provider", "dead")
	if left <= 50 || left > 60 {
		t.Errorf("cooldown remaining %vs, want a little under 60s", left)
	}
	if got := gathered(t, watcherMetrics, "detour_provider_state", "provider", "backup"); got != 0 {
		t.Errorf("backup state %v, want 0 (closed)", got)
	}
	if got := gathered(t, watcherMetrics, "detour_cooldowns_opened_total", "provider", "dead"); got != 0 {
		t.Errorf("the reporting processor opened %v cooldowns itself, want 0", got)
	}
}

// TestTokensAndCostMatchTheProvidersUsage sends 20 requests over two
// priced providers and checks tokens and cost in /metrics against the
// usage the fakes reported, and each result's cost against its price.
func TestTokensAndCostMatchTheProvidersUsage(t *testing.T) {
	// first fails every other request (no cooldown), so each provider
	// answers ten.
	first := providertest.New(providertest.OpenAI, func(n int, _ providertest.Request) providertest.Reply {
		if n%2 == 0 {
			return providertest.Reply{Status: 500}
		}
		return providertest.Reply{Content: "first", Usage: &providertest.Usage{Prompt: 1200, Completion: 345}}
	})
	defer first.Close()
	second := providertest.New(providertest.Anthropic, func(int, providertest.Request) providertest.Reply {
		return providertest.Reply{Content: "second", Usage: &providertest.Usage{Prompt: 800, Completion: 99}}
	})
	defer second.Close()
	h := newHarness(t)
	file := parseChainFile(t, fmt.Sprintf(`
providers:
  - name: first
    type: openai
    base_url: %s
    model: first-model
    max_retries: 0
    failure_threshold: 0
    price: {input_per_mtok: 2.5, output_per_mtok: 10}
  - name: second
    type: anthropic
    base_url: %s
    model: second-model
    price: {input_per_mtok: 0.8, output_per_mtok: 4}
chains:
  default: [first, second]
`, first.URL, second.URL))
	m := metrics.New()
	h.assemble(file, testSettings(), false, withMetrics(m)).run()
	const n = 20
	answered := map[string]int{}
	costs := map[string]float64{}
	for i := range n {
		id := fmt.Sprintf("c%d", i)
		h.publish("default", request(id, "hello"))
		res, _ := h.waitResult(id, 10*time.Second)
		answered[res.Provider]++
		if res.Cost == nil {
			t.Fatalf("%s: no cost in the result of %s", id, res.Provider)
		}
		costs[res.Provider] += *res.Cost
	}
	if answered["first"] != n/2 || answered["second"] != n/2 {
		t.Fatalf("answered %v, want ten each", answered)
	}
	for _, c := range []struct {
		provider, model    string
		prompt, completion float64
		inPrice, outPrice  float64
	}{
		{"first", "first-model", 1200, 345, 2.5, 10},
		{"second", "second-model", 800, 99, 0.8, 4},
	} {
		k := float64(answered[c.provider])
		eventually(t, 5*time.Second, c.provider+" tokens counted", func() bool {
			return gathered(t, m, "detour_tokens_total", "provider", c.provider, "model", c.model, "kind", "completion") == k*c.completion
		})
		if got := gathered(t, m, "detour_tokens_total", "provider", c.provider, "model", c.model, "kind", "prompt"); got != k*c.prompt {
			t.Errorf("%s prompt tokens %v, want %v", c.provider, got, k*c.prompt)
		}
		want := k * (c.prompt*c.inPrice + c.completion*c.outPrice) / 1e6
		if got := gathered(t, m, "detour_cost_total", "provider", c.provider, "model", c.model); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s cost %v, want %v", c.provider, got, want)
		}
		if math.Abs(costs[c.provider]-want) > 1e-9 {
			t.Errorf("%s: the results' costs add up to %v, want %v", c.provider, costs[c.provider], want)
		}
	}
	if got := first.Requests() + second.Requests(); got != n+n/2 {
		t.Errorf("providers received %d requests, want %d", got, n+n/2)
	}
}

// TestTheChainFilesProvidersAreAlwaysReported: /metrics reports a bounded
// number of the provider names the bucket holds besides the chain file's,
// since anyone who may write to it can add one, but never leaves out the
// chain file's own, wherever they sort.
func TestTheChainFilesProvidersAreAlwaysReported(t *testing.T) {
	h := newHarness(t)
	file := parseChainFile(t, outageChain("http://127.0.0.1:1", "http://127.0.0.1:1", 3))
	m := metrics.New()
	h.assemble(file, testSettings(), true, withMetrics(m))
	ctx := context.Background()
	kv, err := h.js.KeyValue(ctx, kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	const extra = 6
	for i := range metrics.MaxOtherProviders + extra {
		if _, err := kv.Put(ctx, fmt.Sprintf("a%03d.health", i), []byte(`{"consecutive_failures":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "the names past the bound are counted", func() bool {
		return gathered(t, m, "detour_provider_names_omitted") == extra
	})
	rec := httptest.NewRecorder()
	m.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, p := range []string{"backup", "dead"} {
		if !strings.Contains(rec.Body.String(), `detour_provider_state{provider="`+p+`"}`) {
			t.Errorf("/metrics leaves out %s, a provider of the chain file", p)
		}
	}
	if n := strings.Count(rec.Body.String(), "\ndetour_provider_state{"); n != metrics.MaxOtherProviders+2 {
		t.Errorf("%d providers reported, want the chain file's 2 and %d others", n, metrics.MaxOtherProviders)
	}
}
