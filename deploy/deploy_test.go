// Package deploy_test checks what deploy/ ships: the Grafana dashboard and
// the Prometheus rules query only metrics detour exports, and the NATS
// cluster configuration is one valid three-node JetStream cluster.
// promtool checks the rules' syntax and alerts in .ci/run.
package deploy_test

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

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/internal/metrics"
	"github.com/detourhq/detour/kvstate"
)

// metricRE finds detour's metric names in a PromQL expression.
var metricRE = regexp.MustCompile(`\bdetour_[a-z_]+\b`)

// exported returns the name of every series detour's /metrics can serve,
// histogram series included, by exercising every collector once.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New()
	m.Settled("default", metrics.OutcomeOK)
	m.Attempts([]chain.Attempt{{Provider: "p", Outcome: chain.OutcomeOK}, {Provider: "p", Outcome: chain.OutcomeSkipped, Class: chain.ClassCooldown}})
	m.Answered("default", time.Second, time.Now(), false)
	m.Nak("default", metrics.NakAllCooling)
	m.DeadLetter("default", deadletter.ReasonExpired)
	m.CooldownOpened("p", chain.ClassServer)
	m.InFlight(1)
	cost := 0.5
	m.Usage(chain.Result{Status: chain.StatusOK, Provider: "p", Model: "m", Usage: chain.Usage{PromptTokens: 1}, Cost: &cost})
	m.ConfigConflicts(0)
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
	data, err := os.ReadFile("detour.dashboard.json")
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
	files, err := filepath.Glob("*.rules.yml")
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

// TestNATSClusterConfig reads each node's configuration as nats-server
// does: one JetStream cluster "detour" of three nodes, each routing to all.
func TestNATSClusterConfig(t *testing.T) {
	names := map[string]bool{}
	for i := 1; i <= 3; i++ {
		path := filepath.Join("nats-cluster", "nats-"+string(rune('0'+i))+".conf")
		opts, err := server.ProcessConfigFile(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !opts.JetStream || opts.Cluster.Name != "detour" || len(opts.Routes) != 3 {
			t.Errorf("%s: jetstream %t, cluster %q, %d routes; want JetStream in cluster detour with 3 routes",
				path, opts.JetStream, opts.Cluster.Name, len(opts.Routes))
		}
		names[opts.ServerName] = true
	}
	if len(names) != 3 {
		t.Errorf("server names %v, want three different ones", names)
	}
	compose, err := os.ReadFile(filepath.Join("nats-cluster", "README.md"))
	if err != nil || !strings.Contains(string(compose), "DETOUR_REPLICAS=3") {
		t.Errorf("nats-cluster/README.md does not set DETOUR_REPLICAS=3: %v", err)
	}
}
