package service_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/cmd/processor/internal/service"
	"github.com/detourhq/detour/config"
)

// The scenarios of this file run processors whose own clocks are minutes
// off the NATS server's: they judge cooldowns and deadlines by the
// server's time all the same (docs/state.md: times are the NATS server's).

// skewedChain is primary, tripped by one 503 for 10 s, then backup.
func skewedChain(t *testing.T, primaryURL, backupURL string) *config.File {
	return parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: primary, type: openai, base_url: %s, model: m1, max_retries: 0, failure_threshold: 1, cooldown: 10s}
  - {name: backup, type: openai, base_url: %s, model: m2}
chains:
  default: [primary, backup]
`, primaryURL, backupURL))
}

// skewed builds a processor whose clock is skew off the real time, logging
// to log.
func (h *harness) skewed(file *config.File, skew time.Duration, log *lockedBuffer) *testProcessor {
	h.t.Helper()
	return h.assemble(file, testSettings(), true, func(o *service.Options) {
		o.Clock = func() time.Time { return time.Now().Add(skew) }
		o.Logger = slog.New(slog.NewTextHandler(log, nil))
	})
}

// TestSkewedProcessorsAgreeOnCooldowns: a processor whose clock runs two
// minutes ahead of or behind the server's neither probes a provider inside
// a cooldown another processor opened, nor opens one that the other
// ignores; and it logs that its clock is off.
func TestSkewedProcessorsAgreeOnCooldowns(t *testing.T) {
	for _, skew := range []time.Duration{2 * time.Minute, -2 * time.Minute} {
		for _, skewedTrips := range []bool{false, true} {
			t.Run(fmt.Sprintf("skew %v, skewed one trips %v", skew, skewedTrips), func(t *testing.T) {
				t.Parallel()
				primary := providertest.New(providertest.OpenAI, providertest.Status(503))
				t.Cleanup(primary.Close)
				backup := providertest.New(providertest.OpenAI, providertest.OK())
				t.Cleanup(backup.Close)
				h := newHarness(t)
				file := skewedChain(t, primary.URL, backup.URL)
				var skewedLog, honestLog lockedBuffer
				first, second := h.skewed(file, 0, &honestLog), h.skewed(file, skew, &skewedLog)
				if skewedTrips {
					first, second = second, first
				}

				first.run()
				h.publish("default", request("trip", "hello"))
				if res, _ := h.waitResult("trip", 10*time.Second); res.Provider != "backup" || res.Attempts[0].Class != chain.ClassServer {
					t.Fatalf("trip: %+v, want primary's 503, then backup", res.Attempts)
				}
				first.stop()
				second.run()
				h.publish("default", request("inside", "hello"))
				res, _ := h.waitResult("inside", 10*time.Second)
				if res.Provider != "backup" || res.Attempts[0].Class != chain.ClassCooldown {
					t.Fatalf("inside the cooldown: %+v, want primary skipped for its cooldown", res.Attempts)
				}
				if got := primary.Requests(); got != 1 {
					t.Fatalf("primary received %d requests, want 1: none inside its cooldown", got)
				}
				if !strings.Contains(skewedLog.String(), "clock is off the NATS server's") || strings.Contains(honestLog.String(), "clock is off") {
					t.Fatalf("skewed log:\n%s\nhonest log:\n%s\nwant the skewed processor, only, to say its clock is off", skewedLog.String(), honestLog.String())
				}
			})
		}
	}
}

// TestASkewedProcessorAgreesOnDeadlines: a processor two minutes ahead of
// the server answers a request whose deadline is a minute away, by the
// server's clock, rather than expire it.
func TestASkewedProcessorAgreesOnDeadlines(t *testing.T) {
	primary := providertest.New(providertest.OpenAI, providertest.OK())
	t.Cleanup(primary.Close)
	h := newHarness(t)
	var log lockedBuffer
	h.skewed(skewedChain(t, primary.URL, primary.URL), 2*time.Minute, &log).run()
	req := request("deadline", "hello")
	req.Deadline = time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano)
	h.publish("default", req)
	if res, _ := h.waitResult(req.ID, 10*time.Second); res.Status != chain.StatusOK || res.Provider != "primary" {
		t.Errorf("result %s %q from %q; want ok from primary", res.Status, res.Error, res.Provider)
	}
}
