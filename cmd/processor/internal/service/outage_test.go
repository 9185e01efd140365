package service_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

// outageChain is the chain file of the outage scenario: dead always fails,
// five attempts a pass, backup answers.
func outageChain(deadURL, backupURL string, threshold int) string {
	return outageChainOf(providertest.OpenAI, deadURL, backupURL, threshold)
}

// outageChainOf is outageChain with providers of the given flavour.
func outageChainOf(flavor providertest.Flavor, deadURL, backupURL string, threshold int) string {
	return fmt.Sprintf(`
providers:
  - name: dead
    type: %[1]s
    base_url: %[2]s
    model: dead-model
    max_retries: 4
    backoff_base: 1ms
    backoff_max: 5ms
    failure_threshold: %[3]d
    cooldown: 60s
  - name: backup
    type: %[1]s
    base_url: %[4]s
    model: backup-model
chains:
  default: [dead, backup]
`, flavor, deadURL, threshold, backupURL)
}

// TestOutageIsRememberedAcrossRequests is acceptance 1 of the core issue:
// a dead provider costs threshold calls, not five per request.
// It runs for both adapters, each against its own fake.
func TestOutageIsRememberedAcrossRequests(t *testing.T) {
	for _, tc := range []struct {
		flavor    providertest.Flavor
		threshold int
		wantCalls int
	}{
		{providertest.OpenAI, 3, 3},
		{providertest.OpenAI, 0, 50},
		{providertest.Anthropic, 3, 3},
		{providertest.Anthropic, 0, 50},
	} {
		t.Run(fmt.Sprintf("%s/threshold=%d", tc.flavor, tc.threshold), func(t *testing.T) {
			dead := providertest.New(tc.flavor, providertest.Status(500))
			defer dead.Close()
			backup := providertest.New(tc.flavor, providertest.OK())
			defer backup.Close()
			h := newHarness(t)
			h.startProcessor(parseChainFile(t, outageChainOf(tc.flavor, dead.URL, backup.URL, tc.threshold)), testSettings())

			for i := range 10 {
				id := fmt.Sprintf("req-%d", i)
				h.publish("default", request(id, "hello"))
				res, header := h.waitResult(id, 10*time.Second)
				if res.Status != chain.StatusOK || res.Provider != "backup" || res.Model != "backup-model" || !res.Degraded || res.Position != 1 {
					t.Fatalf("%s: got status=%s provider=%s model=%s degraded=%v position=%d, want ok from backup, degraded", id, res.Status, res.Provider, res.Model, res.Degraded, res.Position)
				}
				if header.Get("Detour-Model") != "backup-model" || header.Get("Detour-Degraded") != "true" {
					t.Fatalf("%s: headers %v", id, header)
				}
				if len(res.Attempts) == 0 || res.Attempts[0].Provider != "dead" {
					t.Fatalf("%s: attempts do not list dead first: %+v", id, res.Attempts)
				}
				if tc.threshold > 0 && i > 0 && (res.Attempts[0].Class != chain.ClassCooldown || res.Attempts[0].Outcome != chain.OutcomeSkipped) {
					t.Fatalf("%s: dead should be skipped for cooldown, got %+v", id, res.Attempts[0])
				}
				last := res.Attempts[len(res.Attempts)-1]
				if last.Provider != "backup" || last.Outcome != chain.OutcomeOK {
					t.Fatalf("%s: last attempt %+v, want backup ok", id, last)
				}
			}
			if got := dead.Requests(); got != tc.wantCalls {
				t.Fatalf("dead provider received %d requests, want %d", got, tc.wantCalls)
			}
			if got := backup.Requests(); got != 10 {
				t.Fatalf("backup received %d requests, want 10", got)
			}
		})
	}
}
