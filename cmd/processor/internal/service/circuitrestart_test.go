package service_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/cmd/processor/internal/service"
	"github.com/detourhq/detour/kvstate"
)

// waitFleetChecks waits until the running processors have begun n+1 fleet
// checks from now, each seen as the write of its record
// (<processor>.running): a processor's checks follow one another, so n of
// them have ended.
func (h *harness) waitFleetChecks(n int) {
	h.t.Helper()
	sub, err := h.nc.SubscribeSync("$KV." + kvstate.Bucket + ".*." + kvstate.SuffixRunning)
	if err != nil {
		h.t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := h.nc.Flush(); err != nil {
		h.t.Fatal(err)
	}
	for i := range n + 1 {
		if _, err := sub.NextMsg(20 * time.Second); err != nil {
			h.t.Fatalf("fleet check %d of %d: %v", i+1, n+1, err)
		}
	}
}

// TestARestartKeepsTheHoldersCooldown: A's definition of primary (a
// failing endpoint) trips it, holding the plain name; B runs a healthy
// definition of primary. A's processor stops for longer than two of B's
// fleet checks, then starts again with the same chain file, within the
// cooldown: it finds its cooldown on the plain keys, and the failing
// endpoint is not called again while it runs.
func TestARestartKeepsTheHoldersCooldown(t *testing.T) {
	failing := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer failing.Close()
	healthy := providertest.New(providertest.OpenAI, providertest.OK())
	defer healthy.Close()
	h := newHarness(t)
	fileA := primaryChain(t, "a", failing.URL)
	a := h.assemble(fileA, testSettings(), false)
	a.run()
	h.waitServing("a")
	for i := range 3 {
		h.ask("a", fmt.Sprintf("a%d", i))
	}
	if got := failing.Requests(); got != 3 {
		t.Fatalf("the failing endpoint was called %d times before the trip, want 3", got)
	}
	b := h.assemble(primaryChain(t, "b", healthy.URL), testSettings(), false, service.FleetEveryForTest(50*time.Millisecond))
	b.run()
	h.waitServing("b")
	if res := h.ask("b", "b0"); res.Provider != "primary" {
		t.Fatalf("b0 answered by %q, want primary: its definition is healthy", res.Provider)
	}

	a.stop()
	h.waitFleetChecks(3)
	fingerprintA := fleet.Definitions(fileA)["primary"].Fingerprint
	if holder, _ := b.StoreForTest().Holder("primary"); holder.Fingerprint != fingerprintA {
		t.Errorf("primary held by %+v while A's cooldown runs, want A's definition still", holder)
	}
	again := h.assemble(fileA, testSettings(), false)
	again.run()
	if got := again.StoreForTest().CircuitOf("primary", fingerprintA); got != "primary" {
		t.Errorf("A's definition keeps %q after the restart, want the plain circuit", got)
	}
	for i := range 3 {
		if res := h.ask("a", fmt.Sprintf("again%d", i)); res.Provider != "template" {
			t.Errorf("again%d answered by %q, want the template: primary cools", i, res.Provider)
		}
	}
	if got := failing.Requests(); got != 3 {
		t.Errorf("the failing endpoint was called %d times, want still 3: the restarted processor's cooldown was lost", got)
	}
}

// TestARestartKeepsAnotherDefinitionsCooldown: B's definition of primary
// (a failing endpoint) trips its own circuit, primary=<short>, while A's
// holds the name. B's processor stops for longer than two of A's fleet
// checks, then starts again with the same chain file, within the
// cooldown: A has not cleared B's cooling circuit, and the failing
// endpoint is not called again while it runs.
func TestARestartKeepsAnotherDefinitionsCooldown(t *testing.T) {
	failsOnce := providertest.New(providertest.OpenAI, providertest.FailFirst(1, providertest.Status(500), providertest.OK()))
	defer failsOnce.Close()
	failing := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer failing.Close()
	h := newHarness(t)
	a := h.assemble(primaryChain(t, "a", failsOnce.URL), testSettings(), false, service.FleetEveryForTest(50*time.Millisecond))
	a.run()
	h.waitServing("a")
	h.ask("a", "a0") // the first failure claims primary for A's definition
	fileB := primaryChain(t, "b", failing.URL)
	b := h.assemble(fileB, testSettings(), false)
	b.run()
	h.waitServing("b")
	for i := range 3 {
		h.ask("b", fmt.Sprintf("b%d", i))
	}
	circuitB := kvstate.DefinitionCircuit("primary", fleet.Definitions(fileB)["primary"].Fingerprint)
	if _, cooling := b.StoreForTest().Cooling(circuitB, time.Now()); !cooling || failing.Requests() != 3 {
		t.Fatalf("B's circuit %s cooling %v after %d calls, want it tripped after 3", circuitB, cooling, failing.Requests())
	}

	b.stop()
	h.waitFleetChecks(3)
	if _, cooling := a.StoreForTest().Cooling(circuitB, time.Now()); !cooling {
		t.Errorf("A cleared %s while it cools", circuitB)
	}
	again := h.assemble(fileB, testSettings(), false)
	again.run()
	for i := range 3 {
		if res := h.ask("b", fmt.Sprintf("again%d", i)); res.Provider != "template" {
			t.Errorf("again%d answered by %q, want the template: %s cools", i, res.Provider, circuitB)
		}
	}
	if got := failing.Requests(); got != 3 {
		t.Errorf("the failing endpoint was called %d times, want still 3: the restarted processor's cooldown was lost", got)
	}
}
