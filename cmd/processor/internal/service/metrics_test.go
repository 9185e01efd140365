package service_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/cmd/processor/internal/metrics"
	"github.com/detourhq/detour/cmd/processor/internal/service"
)

// TestMetricsCountWhatHappened runs the outage scenario with metrics on and
// checks the counters against what the fake providers counted, and that
// /readyz follows the consume loop.
func TestMetricsCountWhatHappened(t *testing.T) {
	dead := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer dead.Close()
	backup := providertest.New(providertest.OpenAI, providertest.OK())
	defer backup.Close()
	h := newHarness(t)
	nc, err := nats.Connect(h.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m := metrics.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := service.New(ctx, service.Options{
		Settings: testSettings(), File: parseChainFile(t, outageChain(dead.URL, backup.URL, 3)), Conn: nc, Metrics: m,
	})
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(m.Handler(p.Ready))
	defer web.Close()
	status := func(path string) int {
		t.Helper()
		resp, err := http.Get(web.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status("/healthz") != http.StatusOK || status("/readyz") != http.StatusServiceUnavailable {
		t.Fatal("before consuming: want healthy and not ready")
	}
	runDone := make(chan error, 1)
	go func() { runDone <- p.Run(ctx) }()
	eventually(t, 5*time.Second, "ready", func() bool { return status("/readyz") == http.StatusOK })

	const n = 10
	for i := range n {
		id := fmt.Sprintf("m%d", i)
		h.publish("default", request(id, "hello"))
		h.waitResult(id, 10*time.Second)
	}
	eventually(t, 5*time.Second, "every delivery counted", func() bool {
		return gathered(t, m, "detour_requests_total", "chain", "default", "outcome", "degraded") == n
	})
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"detour_provider_calls_total", []string{"provider", "dead", "class", "server"}, float64(dead.Requests())},
		{"detour_provider_calls_total", []string{"provider", "backup", "class", "ok"}, float64(backup.Requests())},
		{"detour_provider_skips_total", []string{"provider", "dead", "reason", "cooldown"}, n - 1},
		{"detour_cooldowns_opened_total", []string{"provider", "dead", "class", "server"}, 1},
	}
	for _, c := range checks {
		if got := gathered(t, m, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	resp, err := http.Get(web.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(text), "detour_provider_call_seconds_bucket") {
		t.Fatalf("/metrics: %s\n%.500s", resp.Status, text)
	}
	cancel()
	<-runDone
	if status("/readyz") != http.StatusServiceUnavailable {
		t.Fatal("after the consume loop stopped: still ready")
	}
}

// gathered returns the value of the counter or gauge name with the given
// label pairs, as reg's /metrics serves it (0 when absent).
func gathered(t *testing.T, reg *metrics.Metrics, name string, labelPairs ...string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	reg.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labelPairs); i += 2 {
		want[labelPairs[i]] = labelPairs[i+1]
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
