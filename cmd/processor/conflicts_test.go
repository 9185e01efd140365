package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/cmd/processor/internal/metrics"
	"github.com/detourhq/detour/cmd/processor/internal/service"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/natstest"
)

// TestConflictingProcessorsAreReported starts two processors that give the
// provider "primary" different base URLs: the second logs an error naming
// both definitions, counts the conflict in detour_config_conflicts, and
// `status -json` lists both definitions with their processors. The API key
// appears nowhere.
func TestConflictingProcessorsAreReported(t *testing.T) {
	const secret = "sk-conflict-SECRET"
	t.Setenv("CONFLICT_KEY", secret)
	srv := natstest.Start(t)
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
	t.Setenv("DETOUR_CONFIG", t.TempDir()+"/none.yaml")
	chainFile := func(baseURL string) *config.File {
		f, err := config.Parse([]byte(fmt.Sprintf(`
providers:
  - {name: primary, type: openai, base_url: %s, model: m, api_key_env: CONFLICT_KEY}
  - {name: template, type: rules, default_reply: later}
chains:
  default: [primary, template]
`, baseURL)), nil)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	var firstLog, secondLog syncBuffer
	startInProcess(t, srv.ClientURL(), chainFile("http://127.0.0.1:1/v1"), &firstLog, nil)
	second := metrics.New()
	startInProcess(t, srv.ClientURL(), chainFile("http://127.0.0.2:1/v1"), &secondLog, second)

	waitUntil(t, 10*time.Second, "the second processor logs the conflict", func() bool {
		return strings.Contains(secondLog.String(), "level=ERROR")
	})
	logLine := secondLog.String()
	for _, want := range []string{"provider=primary", "http://127.0.0.1:1/v1", "http://127.0.0.2:1/v1"} {
		if !strings.Contains(logLine, want) {
			t.Errorf("the error log lacks %q:\n%s", want, logLine)
		}
	}
	if got := gauge(t, second, `detour_config_conflicts{kind="provider"}`); got != 1 {
		t.Errorf("detour_config_conflicts = %v, want 1", got)
	}

	var out, errOut bytes.Buffer
	if code := run([]string{"status", "-json"}, &out, &errOut); code != 0 {
		t.Fatalf("status -json: exit %d, stderr %q", code, errOut.String())
	}
	var rows []fleet.StatusRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	urls := map[string]int{}
	for _, r := range rows {
		if r.Provider == "template" && len(r.Conflict) != 0 {
			t.Errorf("template is defined alike, yet listed in conflict: %+v", r.Conflict)
		}
		if r.Provider != "primary" {
			continue
		}
		for _, h := range r.Conflict {
			urls[h.BaseURL] += len(h.Processors)
		}
	}
	if urls["http://127.0.0.1:1/v1"] != 1 || urls["http://127.0.0.2:1/v1"] != 1 {
		t.Errorf("status -json: conflict of primary lists %v, want each base URL on one processor:\n%s", urls, out.String())
	}
	out.Reset()
	if code := run([]string{"status"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "CONFLICT: provider primary") {
		t.Errorf("status: exit %d, no conflict shown:\n%s", code, out.String())
	}
	for name, text := range map[string]string{"first log": firstLog.String(), "second log": logLine, "status": out.String()} {
		if strings.Contains(text, secret) {
			t.Errorf("%s reveals the API key", name)
		}
	}
}

// startInProcess runs a processor on its own connection, logging to w at
// warn and above, until the test ends; it returns once the processor
// serves its micro service.
func startInProcess(t *testing.T, url string, file *config.File, w *syncBuffer, m *metrics.Metrics) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	settings := config.Settings{
		Workers: 2, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 100,
		RequestTTL: time.Hour, ResultTTL: time.Hour, ReplyPrefixes: []string{"detour.results.", "_INBOX."},
		MaxPayload: 1 << 20, ShutdownTimeout: 5 * time.Second, MaxInvalidDeliveries: 3,
	}
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := service.New(ctx, service.Options{Settings: settings, File: file, Conn: nc, Logger: logger, Metrics: m})
	if err != nil {
		cancel()
		nc.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.Run(ctx); err != nil {
			t.Errorf("processor: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done; nc.Close() })
	waitUntil(t, 10*time.Second, "the processor serves", p.Ready)
	// Ready is the consume loop; the micro service starts beside it.
	waitUntil(t, 10*time.Second, "the micro service answers", func() bool {
		_, err := nc.Request("$SRV.PING.detour", nil, time.Second)
		return err == nil
	})
}

// gauge reads a gauge, named with its labels as /metrics writes them,
// from what m's /metrics serves.
func gauge(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

// TestChainConflictsAreReported starts two processors that define every
// provider alike but run chain default with different providers: the
// second logs an error naming both lists and the processors that run
// them, counts the chain in detour_config_conflicts{kind="chain"} (and no
// provider in kind="provider"), and `status` and `status -json` list both
// lists with their processors.
func TestChainConflictsAreReported(t *testing.T) {
	srv := natstest.Start(t)
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
	t.Setenv("DETOUR_CONFIG", t.TempDir()+"/none.yaml")
	chainFile := func(chain string) *config.File {
		f, err := config.Parse([]byte(`
providers:
  - {name: primary, type: openai, base_url: "http://127.0.0.1:1/v1", model: m, api_key_env: CHAIN_KEY}
  - {name: template, type: rules, default_reply: later}
chains:
  default: `+chain+`
`), func(string) (string, bool) { return "k", true })
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	var firstLog, secondLog syncBuffer
	startInProcess(t, srv.ClientURL(), chainFile("[primary, template]"), &firstLog, nil)
	second := metrics.New()
	startInProcess(t, srv.ClientURL(), chainFile("[template]"), &secondLog, second)

	waitUntil(t, 10*time.Second, "the second processor logs the conflict", func() bool {
		return strings.Contains(secondLog.String(), "level=ERROR")
	})
	logLine := secondLog.String()
	for _, want := range []string{"chain=default", "runs a chain of this name with different providers", `here=[template]`, "[primary template] on "} {
		if !strings.Contains(logLine, want) {
			t.Errorf("the error log lacks %q:\n%s", want, logLine)
		}
	}
	if got := gauge(t, second, `detour_config_conflicts{kind="chain"}`); got != 1 {
		t.Errorf(`detour_config_conflicts{kind="chain"} = %v, want 1`, got)
	}
	if got := gauge(t, second, `detour_config_conflicts{kind="provider"}`); got != 0 {
		t.Errorf(`detour_config_conflicts{kind="provider"} = %v, want 0: every provider is defined alike`, got)
	}

	var out, errOut bytes.Buffer
	if code := run([]string{"status", "-json"}, &out, &errOut); code != 0 {
		t.Fatalf("status -json: exit %d, stderr %q", code, errOut.String())
	}
	var elements []struct {
		Provider string           `json:"provider"`
		Chain    string           `json:"chain"`
		Lists    []fleet.HeldList `json:"lists"`
	}
	if err := json.Unmarshal(out.Bytes(), &elements); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	lists := map[string]int{}
	for _, e := range elements {
		if e.Chain == "" {
			continue
		}
		if e.Chain != "default" || e.Provider != "" {
			t.Errorf("status -json: a chain conflict %+v, want one of chain default only", e)
		}
		for _, l := range e.Lists {
			lists[strings.Join(l.Providers, " ")] += len(l.Processors)
		}
	}
	if lists["primary template"] != 1 || lists["template"] != 1 || len(lists) != 2 {
		t.Errorf("status -json: chain default's lists %v, want each on one processor:\n%s", lists, out.String())
	}
	out.Reset()
	if code := run([]string{"status"}, &out, &errOut); code != 0 {
		t.Fatalf("status: exit %d, stderr %q", code, errOut.String())
	}
	for _, want := range []string{"CONFLICT: chain default has different providers", "[primary template]  on [", "[template]  on ["} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "CONFLICT: provider") {
		t.Errorf("status shows a provider conflict where every provider is defined alike:\n%s", out.String())
	}
}
