package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/cmd/processor/internal/metrics"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/kvstate/kvstatetest"
)

// mirrorOf starts a server, writes a health key for each of providers the
// way any client allowed to publish on the bucket's subjects can (the KV
// client would refuse some of these names as keys), and returns a mirror
// that has loaded them and follows the bucket until the test ends.
func mirrorOf(t *testing.T, providers ...string) *kvstate.Store {
	t.Helper()
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kv, err := kvstate.OpenBucket(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range providers {
		subject := "$KV." + kvstate.Bucket + "." + kvstate.HealthKey(p)
		if _, err := js.Publish(ctx, subject, []byte(`{"consecutive_failures":1,"trips":0}`)); err != nil {
			t.Fatalf("publishing %q: %v", subject, err)
		}
	}
	s := kvstate.New(js, kv, kvstate.Options{ID: "test"})
	kvstatetest.Follow(t, ctx, s)
	return s
}

// report makes m report s's view with own as the chain file's providers,
// as a processor does.
func report(m *metrics.Metrics, s *kvstate.Store, own ...string) {
	m.ReportStates(nil, func(now time.Time) []kvstate.ProviderStatus { return s.Status(now, own...) }, own...)
}

// TestScrapeSkipsAProviderNameThatIsNotUTF8: a key of the bucket whose
// provider name is not valid UTF-8 costs its own series only: /metrics
// still answers 200 with every other provider, and counts the name left
// out.
func TestScrapeSkipsAProviderNameThatIsNotUTF8(t *testing.T) {
	s := mirrorOf(t, "bad\xff", "good", "other")
	m := metrics.New()
	report(m, s, "good")
	text := scrape(t, m)
	for _, series := range []string{
		`detour_provider_state{provider="good"} 0`,
		`detour_provider_state{provider="other"} 0`,
		`detour_cooldown_remaining_seconds{provider="good"} 0`,
		`detour_provider_names_omitted 1`,
	} {
		if line(text, series) == "" {
			t.Errorf("no series %s in\n%s", series, text)
		}
	}
	if strings.Contains(text, "bad") {
		t.Errorf("the name that is not UTF-8 is reported:\n%s", text)
	}
}

// TestScrapeBoundsTheProvidersOfTheBucket: the chain file's providers are
// always reported; of the other names in the bucket, those that are not
// valid provider names are left out, and the valid ones only up to
// MaxOtherProviders, in name order, the rest counted as omitted.
func TestScrapeBoundsTheProvidersOfTheBucket(t *testing.T) {
	var names []string
	for i := range metrics.MaxOtherProviders + 6 {
		names = append(names, fmt.Sprintf("p%03d", i))
	}
	invalid := []string{"a=b", "x/y", strings.Repeat("n", 65)}
	// "zz-own" sorts after every other name, and has state; "zz-quiet",
	// of the chain file too, has none.
	s := mirrorOf(t, append(append(names, invalid...), "zz-own")...)
	m := metrics.New()
	report(m, s, "zz-own", "zz-quiet")
	text := scrape(t, m)
	if n := strings.Count(text, "\ndetour_provider_state{"); n != metrics.MaxOtherProviders+2 {
		t.Errorf("%d provider state series, want %d others and the chain file's 2", n, metrics.MaxOtherProviders)
	}
	if n := strings.Count(text, "\ndetour_cooldown_remaining_seconds{"); n != metrics.MaxOtherProviders+2 {
		t.Errorf("%d cooldown series, want %d others and the chain file's 2", n, metrics.MaxOtherProviders)
	}
	for _, p := range []string{"zz-own", "zz-quiet", names[0], names[metrics.MaxOtherProviders-1]} {
		if line(text, `detour_provider_state{provider="`+p+`"}`) == "" {
			t.Errorf("provider %s is not reported", p)
		}
	}
	for _, p := range append([]string{names[metrics.MaxOtherProviders]}, invalid...) {
		if line(text, `detour_provider_state{provider="`+p+`"}`) != "" {
			t.Errorf("provider %s is reported past the bound", p)
		}
	}
	if want := fmt.Sprintf("detour_provider_names_omitted %d", 6+len(invalid)); line(text, want) == "" {
		t.Errorf("no series %s in\n%s", want, text)
	}
}

// TestScrapeReportsEachDefinitionsCircuit: the circuit of another
// definition of a provider (provider=<short fingerprint>) is reported as a
// provider of its own, among the others; a name that only looks like one
// is left out.
func TestScrapeReportsEachDefinitionsCircuit(t *testing.T) {
	s := mirrorOf(t, "primary", "primary=0a0b0c0d", "primary=0a0b0c0", "=0a0b0c0d")
	m := metrics.New()
	report(m, s, "primary")
	text := scrape(t, m)
	for _, p := range []string{"primary", "primary=0a0b0c0d"} {
		if line(text, `detour_provider_state{provider="`+p+`"}`) == "" {
			t.Errorf("circuit %s is not reported:\n%s", p, text)
		}
	}
	if line(text, "detour_provider_names_omitted 2") == "" {
		t.Errorf("the two names that are no circuits are not counted as omitted:\n%s", text)
	}
}
