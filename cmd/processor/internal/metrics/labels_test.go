package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/cmd/processor/internal/metrics"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/stream"
)

// TestLabelValues pins every label value: dashboards and alerts select on
// them, so a renamed constant must not rename the series.
func TestLabelValues(t *testing.T) {
	outcomes := []string{"ok", "degraded", "retry", "already_answered",
		"bad_request", "bad_reply_subject", "too_large", "expired", "poison", "invalid_output"}
	if got := strs(stream.Outcomes()); !slices.Equal(got, outcomes) {
		t.Errorf("Outcomes() = %v, want %v", got, outcomes)
	}
	naks := []string{"all_cooling", "undecided", "failures", "shutdown", "error"}
	if got := strs(stream.NakReasons()); !slices.Equal(got, naks) {
		t.Errorf("NakReasons() = %v, want %v", got, naks)
	}
	if got := stream.DeadLettered(deadletter.ReasonExpired); got != "expired" {
		t.Errorf("DeadLettered(expired) = %q, want the reason itself", got)
	}
}

// TestHelpListsLabelValues checks that each labelled counter's help text
// names every value its label takes, and that the values count.
func TestHelpListsLabelValues(t *testing.T) {
	m := metrics.New()
	for _, o := range stream.Outcomes() {
		m.Settled("default", o)
	}
	for _, r := range stream.NakReasons() {
		m.Nak("default", r)
	}
	for _, r := range deadletter.Reasons() {
		m.DeadLetter("default", r)
	}
	text := scrape(t, m)
	cases := []struct {
		name, label string
		values      []string
	}{
		{"detour_requests_total", "outcome", strs(stream.Outcomes())},
		{"detour_naks_total", "reason", strs(stream.NakReasons())},
		{"detour_dead_letters_total", "reason", strs(deadletter.Reasons())},
	}
	for _, c := range cases {
		help := line(text, "# HELP "+c.name+" ")
		if help == "" {
			t.Errorf("%s: no help text in\n%s", c.name, text)
			continue
		}
		for _, v := range c.values {
			if !strings.Contains(help, v) {
				t.Errorf("%s: help %q does not name %s", c.name, help, v)
			}
			series := c.name + `{chain="default",` + c.label + `="` + v + `"} 1`
			if line(text, series) == "" {
				t.Errorf("%s: no series %s", c.name, series)
			}
		}
	}
}

// scrape returns what /metrics serves.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

// line returns the first line of text that starts with prefix, or "".
func line(text, prefix string) string {
	for l := range strings.Lines(text) {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func strs[T ~string](values []T) []string {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	return s
}

// TestLabelValuesFromOutsideAreMadeValid: a chain, provider or model name
// that is not valid UTF-8 would make the registry panic while a delivery
// is settled; such bytes are counted as U+FFFD instead, and a model name of
// any length is cut at 128 bytes, marked "…".
func TestLabelValuesFromOutsideAreMadeValid(t *testing.T) {
	m := metrics.New()
	m.Settled("c\xff", stream.OutcomeOK)
	m.Nak("c\xff", stream.NakFailures)
	m.Attempts([]chain.Attempt{{Provider: "p\xff", Outcome: chain.OutcomeFailed, Class: chain.ClassNetwork}})
	m.Usage(chain.Result{Status: chain.StatusOK, Provider: "p\xff", Model: "m\xff", Usage: chain.Usage{PromptTokens: 1}})
	long := strings.Repeat("é", 100) // 200 bytes
	m.Usage(chain.Result{Status: chain.StatusOK, Provider: "p", Model: long, Usage: chain.Usage{PromptTokens: 1}})
	text := scrape(t, m)
	for _, series := range []string{
		`detour_requests_total{chain="c` + "\uFFFD" + `",outcome="ok"} 1`,
		`detour_naks_total{chain="c` + "\uFFFD" + `",reason="failures"} 1`,
		`detour_provider_calls_total{class="network",provider="p` + "\uFFFD" + `"} 1`,
		`detour_tokens_total{kind="prompt",model="m` + "\uFFFD" + `",provider="p` + "\uFFFD" + `"} 1`,
		`detour_tokens_total{kind="prompt",model="` + long[:128] + `…",provider="p"} 1`,
	} {
		if line(text, series) == "" {
			t.Errorf("no series %s in\n%s", series, text)
		}
	}
}

// TestCacheCountsByResult: detour_cache_total counts each request of a
// chain with a response cache by how the cache took part, as the cache's
// Runner tells its Observer.
func TestCacheCountsByResult(t *testing.T) {
	m := metrics.New()
	m.Cache("c", chain.CacheMiss)
	m.Cache("c", chain.CacheHit)
	m.Cache("c", chain.CacheHit)
	m.Cache("c", chain.CacheStale)
	text := scrape(t, m)
	for _, series := range []string{
		`detour_cache_total{chain="c",result="hit"} 2`,
		`detour_cache_total{chain="c",result="miss"} 1`,
		`detour_cache_total{chain="c",result="stale"} 1`,
	} {
		if line(text, series) == "" {
			t.Errorf("no series %s in\n%s", series, text)
		}
	}
}
