package metrics_test

// The Grafana dashboard and the Prometheus rules that deploy/ ships query
// only metrics the processor exports.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/cmd/processor/internal/metrics"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/stream"
)

// deployDir is deploy/, from this package's folder.
const deployDir = "../../../../deploy"

// metricRE finds detour's metric names in a PromQL expression.
var metricRE = regexp.MustCompile(`\bdetour_[a-z_]+\b`)

// exported returns the name of every series detour's /metrics can serve,
// histogram series included, by exercising every collector once.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New()
	m.Settled("default", stream.OutcomeOK)
	m.Attempts([]chain.Attempt{{Provider: "p", Outcome: chain.OutcomeOK}, {Provider: "p", Outcome: chain.OutcomeSkipped, Class: chain.ClassCooldown}})
	m.Answered("default", time.Second, time.Now(), false)
	m.Nak("default", stream.NakAllCooling)
	m.DeadLetter("default", deadletter.ReasonExpired)
	m.CooldownOpened("p", chain.ClassServer)
	m.InFlight(1)
	cost := 0.5
	m.Usage(chain.Result{Status: chain.StatusOK, Provider: "p", Model: "m", Usage: chain.Usage{PromptTokens: 1}, Cost: &cost})
	m.ConfigConflicts(0, 0)
	m.ReportStates(nil, func(time.Time) []kvstate.ProviderStatus { return []kvstate.ProviderStatus{{Provider: "p"}} })
	rec := httptest.NewRecorder()
	m.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	names := map[string]bool{}
	for line := range strings.Lines(rec.Body.String()) {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			f := strings.Fields(name)
			names[f[0]] = true
			if f[1] == "histogram" {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					names[f[0]+s] = true
				}
			}
		}
	}
	return names
}

// TestDashboardQueriesExist parses the dashboard and checks that every
// query names only metrics detour exports.
func TestDashboardQueriesExist(t *testing.T) {
	known := exported(t)
	data, err := os.ReadFile(filepath.Join(deployDir, "detour.dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("detour.dashboard.json: %v", err)
	}
	if dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatal("detour.dashboard.json: no title or no panels")
	}
	var used []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			names := metricRE.FindAllString(q.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no detour metric", p.Title, q.Expr)
			}
			for _, n := range names {
				if !known[n] {
					t.Errorf("panel %q: query %q names %s, which detour does not export", p.Title, q.Expr, n)
				}
				used = append(used, n)
			}
		}
	}
	for _, want := range []string{"detour_provider_state", "detour_cooldown_remaining_seconds", "detour_tokens_total", "detour_cost_total", "detour_config_conflicts"} {
		if !slices.Contains(used, want) {
			t.Errorf("the dashboard shows no %s", want)
		}
	}
}

// TestRulesQueriesExist checks that every alert names only metrics detour
// exports, and that the four alerts the deployment relies on are there.
func TestRulesQueriesExist(t *testing.T) {
	known := exported(t)
	files, err := filepath.Glob(filepath.Join(deployDir, "*.rules.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no *.rules.yml: %v", err)
	}
	var alerts []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rules struct {
			Groups []struct {
				Rules []struct {
					Alert string `yaml:"alert"`
					Expr  string `yaml:"expr"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(data, &rules); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				alerts = append(alerts, r.Alert)
				for _, n := range metricRE.FindAllString(r.Expr, -1) {
					if !known[n] {
						t.Errorf("%s: alert %s names %s, which detour does not export", f, r.Alert, n)
					}
				}
			}
		}
	}
	for _, want := range []string{"DetourProviderOpenTooLong", "DetourChainAllProvidersCooling", "DetourDeadLetters", "DetourRequestsPastDeadline"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s", want)
		}
	}
}
