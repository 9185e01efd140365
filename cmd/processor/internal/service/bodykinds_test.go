package service_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/cmd/processor/internal/service"
	"github.com/detourhq/detour/kvstate"
)

// The scenarios of this file hold the body to its word: a body that names
// the request cools nothing, one that names the credential cools at once,
// and a bare 402/403/404 or one that names a passing condition is counted
// like a server failure. Each runs through a processor on a real NATS
// server, for both adapters, with a "primary" under test and a "backup"
// that answers.

// lockedBuffer is a log sink the processor's workers write to while the
// test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newLoggedScenario is newBodyScenario with the processor's error-level log
// kept in the returned buffer.
func newLoggedScenario(t *testing.T, flavor providertest.Flavor, script providertest.Script, knobs string) (*bodyScenario, *lockedBuffer) {
	t.Helper()
	primary := providertest.New(flavor, script)
	t.Cleanup(primary.Close)
	backup := providertest.New(flavor, providertest.OK())
	t.Cleanup(backup.Close)
	h := newHarness(t)
	logged := &lockedBuffer{}
	p := h.assemble(parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: primary, type: %[1]s, base_url: %[2]s, model: m1, backoff_base: 1ms, backoff_max: 2ms, %[4]s}
  - {name: backup, type: %[1]s, base_url: %[3]s, model: m2}
chains:
  default: [primary, backup]
`, flavor, primary.URL, backup.URL, knobs)), testSettings(), false, func(o *service.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logged, &slog.HandlerOptions{Level: slog.LevelError}))
	})
	p.run()
	return &bodyScenario{h: h, primary: primary, backup: backup, store: p.StoreForTest()}, logged
}

// ask publishes a request with prompt and waits for its result.
func (s *bodyScenario) ask(id, prompt string) chain.Result {
	s.h.t.Helper()
	s.h.publish("default", request(id, prompt))
	res, _ := s.h.waitResult(id, 10*time.Second)
	return res
}

// TestFlaggedInputCoolsNothing: OpenRouter's 403 for a prompt its
// moderation flags blames that prompt alone. It is class request, no retry
// and no key written, though one counted failure would cool the provider
// (failure_threshold 1); the next, innocent prompt goes to the provider.
func TestFlaggedInputCoolsNothing(t *testing.T) {
	forBothFlavors(t, func(t *testing.T, flavor providertest.Flavor) {
		s, logged := newLoggedScenario(t, flavor, providertest.Moderated("forbidden", "self-harm", nil), "max_retries: 2, failure_threshold: 1, auth_cooldown: 1h")
		res := s.ask("flagged", "a forbidden question")
		first := res.Attempts[0]
		if res.Provider != "backup" || first.Class != chain.ClassRequest || first.StatusCode != 403 || !strings.Contains(first.Error, "Your input was flagged") {
			t.Fatalf("provider %q, first attempt %+v; want backup after request 403 keeping the message", res.Provider, first)
		}
		if got := s.primary.Requests(); got != 1 {
			t.Fatalf("primary received %d requests for the flagged prompt, want 1", got)
		}
		s.wantNothingWritten()
		if res := s.ask("innocent", "hello"); res.Provider != "primary" {
			t.Fatalf("innocent prompt answered by %q (attempts %+v), want primary", res.Provider, res.Attempts)
		}
		if got := s.primary.Requests(); got != 2 {
			t.Fatalf("primary received %d requests in all, want 2", got)
		}
		if strings.Contains(logged.String(), "level=ERROR") {
			t.Fatalf("a flagged prompt logged at error level: %s", logged)
		}
	})
}

// TestInvalidKeyCoolsAtOnce: Gemini's 400 INVALID_ARGUMENT with an
// ErrorInfo of reason API_KEY_INVALID is auth: one call, auth_cooldown at
// once, told at error level.
func TestInvalidKeyCoolsAtOnce(t *testing.T) {
	forBothFlavors(t, func(t *testing.T, flavor providertest.Flavor) {
		s, logged := newLoggedScenario(t, flavor, providertest.KeyInvalid(), "max_retries: 3, failure_threshold: 3, auth_cooldown: 7s")
		res := s.ask("key", "hello")
		if first := res.Attempts[0]; res.Provider != "backup" || first.Class != chain.ClassAuth || first.StatusCode != 400 {
			t.Fatalf("provider %q, first attempt %+v; want backup after auth 400", res.Provider, first)
		}
		if got := s.primary.Requests(); got != 1 {
			t.Fatalf("primary received %d requests, want 1", got)
		}
		if c, ttl := s.h.storedCooldown("primary"); c.Class != chain.ClassAuth || c.DurationS != 7 || ttl != 7*time.Second {
			t.Fatalf("cooldown %+v with TTL %v, want auth_cooldown 7s of auth", c, ttl)
		}
		if log := logged.String(); !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "API key not valid") {
			t.Fatalf("no error-level log naming the refused key: %q", log)
		}
	})
}

// TestBareRefusalsAreCountedLikeServerFailures: a 402, 403 or 404 whose
// body names neither the request nor the credential (the status text, a
// proxy's page, a model the fake does not know) cools the provider only at
// failure_threshold, as a 503 would: two requests leave it counting, the
// third trips it, the fourth skips it.
func TestBareRefusalsAreCountedLikeServerFailures(t *testing.T) {
	cases := []struct {
		name   string
		script providertest.Script
	}{
		{"402 status text", reply(providertest.Reply{Status: 402, ErrorShape: providertest.ShapeString, ErrorMessage: "Payment Required"})},
		{"403 status text", reply(providertest.Reply{Status: 403, ErrorShape: providertest.ShapeString, ErrorMessage: "Forbidden"})},
		{"403 proxy page", providertest.HTMLError(403, "Attention Required! | Cloudflare")},
		{"404 unknown model", providertest.Status(404)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forBothFlavors(t, func(t *testing.T, flavor providertest.Flavor) {
				s, logged := newLoggedScenario(t, flavor, tc.script, "max_retries: 0, failure_threshold: 3, cooldown: 10s, auth_cooldown: 1h")
				for i := 1; i <= 2; i++ {
					res := s.ask(fmt.Sprintf("r%d", i), "hello")
					if a := res.Attempts[0]; res.Provider != "backup" || a.Class != chain.ClassServer {
						t.Fatalf("request %d: provider %q attempts %+v; want backup after server", i, res.Provider, res.Attempts)
					}
					var health kvstate.Health
					if !s.kvValue(kvstate.HealthKey("primary"), &health) || health.ConsecutiveFailures != i {
						t.Fatalf("request %d: health %+v, want %d consecutive failures", i, health, i)
					}
					var c kvstate.Cooldown
					if s.kvValue(kvstate.CooldownKey("primary"), &c) {
						t.Fatalf("request %d: cooling before failure_threshold: %+v", i, c)
					}
				}
				s.ask("r3", "hello")
				if c, ttl := s.h.storedCooldown("primary"); c.Class != chain.ClassServer || ttl != 10*time.Second {
					t.Fatalf("cooldown %+v with TTL %v after the third, want the 10s cooldown of server", c, ttl)
				}
				if res := s.ask("r4", "hello"); res.Attempts[0].Class != chain.ClassCooldown {
					t.Fatalf("fourth request attempts %+v, want primary skipped", res.Attempts)
				}
				if got := s.primary.Requests(); got != 3 {
					t.Fatalf("primary received %d requests, want 3", got)
				}
				if strings.Contains(logged.String(), "level=ERROR") {
					t.Fatalf("a bare refusal logged as a refused credential: %s", logged)
				}
			})
		})
	}
}

// TestCapacityBodiesAreRetriedAndCounted: a 4xx whose body says the
// condition passes (OpenRouter's "No endpoints found for …", an
// "overloaded … try again later") is retried and counted like a server
// failure: two calls within the pass, and the provider trips at
// failure_threshold 2.
func TestCapacityBodiesAreRetriedAndCounted(t *testing.T) {
	cases := []struct {
		name   string
		script providertest.Script
		status int
	}{
		{"no endpoints", providertest.NoEndpoints(), 404},
		{"overloaded", reply(providertest.Reply{Status: 400, ErrorShape: providertest.ShapeGateway,
			ErrorMessage: "our servers are currently overloaded. Please try again later"}), 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forBothFlavors(t, func(t *testing.T, flavor providertest.Flavor) {
				s, _ := newLoggedScenario(t, flavor, tc.script, "max_retries: 1, failure_threshold: 2, cooldown: 10s")
				res := s.ask("busy", "hello")
				if res.Provider != "backup" || len(res.Attempts) != 3 {
					t.Fatalf("provider %q attempts %+v; want two calls to primary, then backup", res.Provider, res.Attempts)
				}
				for _, a := range res.Attempts[:2] {
					if a.Class != chain.ClassServer || a.StatusCode != tc.status {
						t.Fatalf("attempt %+v, want server %d", a, tc.status)
					}
				}
				if got := s.primary.Requests(); got != 2 {
					t.Fatalf("primary received %d requests, want 2 (one retry)", got)
				}
				if c, _ := s.h.storedCooldown("primary"); c.Class != chain.ClassServer {
					t.Fatalf("cooldown %+v, want one of server opened at failure_threshold", c)
				}
			})
		})
	}
}

// reply is a script answering every request with r.
func reply(r providertest.Reply) providertest.Script {
	return func(int, providertest.Request) providertest.Reply { return r }
}
