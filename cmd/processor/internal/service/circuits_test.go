package service_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/cmd/processor/internal/metrics"
	"github.com/detourhq/detour/cmd/processor/internal/service"
	"github.com/detourhq/detour/cmd/processor/internal/statuspage"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/wire"
)

// primaryChain is a chain file whose chain chainName runs primary, at
// baseURL with failure_threshold 3 and a minute's cooldown, then a rules
// template that answers whatever primary does not.
func primaryChain(t *testing.T, chainName, baseURL string) *config.File {
	t.Helper()
	return primaryChainCooling(t, chainName, baseURL, "60s")
}

// primaryChainCooling is primaryChain with a cooldown of its own.
func primaryChainCooling(t *testing.T, chainName, baseURL, cooldown string) *config.File {
	t.Helper()
	return parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: primary, type: openai, base_url: %s, model: m, max_retries: 0, failure_threshold: 3, cooldown: %s}
  - {name: template, type: rules, default_reply: later}
chains:
  %s: [primary, template]
`, baseURL, cooldown, chainName))
}

// waitServing waits until a processor serves chainName: its consumer has
// a pull waiting. A processor that starts with other chains keeps the
// subject of a chain only while it is served (stream.EnsureTopology).
func (h *harness) waitServing(chainName string) {
	h.t.Helper()
	eventually(h.t, 10*time.Second, "a processor pulls chain "+chainName, func() bool {
		c, err := h.js.Consumer(context.Background(), wire.RequestsStream, wire.ConsumerName(chainName))
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumWaiting > 0
	})
}

// ask publishes one request to chainName and waits for its result.
func (h *harness) ask(chainName, id string) chain.Result {
	h.t.Helper()
	h.publish(chainName, request(id, "hello"))
	res, _ := h.waitResult(id, 10*time.Second)
	return res
}

// TestEachDefinitionTripsItsOwnCircuit: two processors define primary
// differently, one at a failing endpoint, one at a healthy one, and their
// requests alternate (each runs a chain of its own, so that which
// processor takes a request is known). The failing definition trips after
// exactly failure_threshold calls to its endpoint, counted by the fake,
// although the other definition succeeds between each of them; the
// healthy definition is never skipped.
func TestEachDefinitionTripsItsOwnCircuit(t *testing.T) {
	failing := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer failing.Close()
	healthy := providertest.New(providertest.OpenAI, providertest.OK())
	defer healthy.Close()
	h := newHarness(t)
	h.startProcessor(primaryChain(t, "a", failing.URL), testSettings())
	h.waitServing("a")
	healthyMetrics := metrics.New()
	h.assemble(primaryChain(t, "b", healthy.URL), testSettings(), false, withMetrics(healthyMetrics)).run()

	const rounds = 10
	for i := range rounds {
		if res := h.ask("a", fmt.Sprintf("a%d", i)); res.Provider != "template" {
			t.Fatalf("a%d answered by %q, want the template: primary fails there", i, res.Provider)
		}
		if res := h.ask("b", fmt.Sprintf("b%d", i)); res.Provider != "primary" {
			t.Fatalf("b%d answered by %q, want primary: its definition is healthy (attempts %+v)", i, res.Provider, res.Attempts)
		}
	}
	if got := failing.Requests(); got != 3 {
		t.Errorf("the failing endpoint was called %d times, want 3: its definition's circuit trips at failure_threshold, whatever the other definition's successes", got)
	}
	if got := healthy.Requests(); got != rounds {
		t.Errorf("the healthy endpoint was called %d times, want %d", got, rounds)
	}
	if got := gathered(t, healthyMetrics, "detour_provider_skips_total", "provider", "primary"); got != 0 {
		t.Errorf("the healthy definition's processor skipped primary %v times, want never", got)
	}
}

// TestARollingChangeStartsAFreshCircuit: the processors of primary's old
// definition tripped it (for a second) and stopped; a processor of the
// new definition (another endpoint, failing too) starts and, once the old
// cooldown has ended, takes the name over. The new definition carries
// none of the old one's failures or trips: its circuit trips after
// exactly failure_threshold calls of its own, as a first trip.
func TestARollingChangeStartsAFreshCircuit(t *testing.T) {
	oldEndpoint := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer oldEndpoint.Close()
	newEndpoint := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer newEndpoint.Close()
	h := newHarness(t)
	old := h.buildProcessor(primaryChainCooling(t, "a", oldEndpoint.URL, "1s"), testSettings())
	old.run()
	for i := range 3 {
		h.ask("a", fmt.Sprintf("old%d", i))
	}
	if health, _ := old.StoreForTest().Health("primary"); health.Trips != 1 {
		t.Fatalf("the old definition's health %+v, want it tripped", health)
	}
	oldHolder, _ := old.StoreForTest().Holder("primary")
	old.stop()

	p := h.assemble(primaryChain(t, "a", newEndpoint.URL), testSettings(), false, service.FleetEveryForTest(50*time.Millisecond))
	p.run()
	eventually(t, 10*time.Second, "the new definition takes primary over", func() bool {
		holder, _ := p.StoreForTest().Holder("primary")
		return holder.Fingerprint != oldHolder.Fingerprint
	})
	for i := range 5 {
		h.ask("a", fmt.Sprintf("new%d", i))
	}
	if got := newEndpoint.Requests(); got != 3 {
		t.Errorf("the new endpoint was called %d times, want 3: none of the old definition's failures or cooldown carried over", got)
	}
	c, ok := mirroredCooldown(p.StoreForTest(), "primary")
	if !ok || c.Trip != 1 || c.DurationS != 60 {
		t.Errorf("primary's cooldown %+v (%v), want the new definition's first trip, of 60s", c, ok)
	}
}

// TestTheNewDefinitionKeepsItsOwnCircuitUntilTheOldIsGone: a processor of
// primary's new definition (an endpoint that fails once, then answers)
// starts while one of the old (tripped) still runs the same chain: it
// calls its endpoint, never skipping it for the old one's cooldown, on a
// circuit of its own, primary=<short fingerprint>, which records its
// failure and success. Once the old processor stopped, the new definition
// takes the plain name over once the old cooldown (of a few seconds) has
// ended: the old one's health is cleared, and so is the new one's own
// circuit, of no more use.
func TestTheNewDefinitionKeepsItsOwnCircuitUntilTheOldIsGone(t *testing.T) {
	oldEndpoint := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer oldEndpoint.Close()
	newEndpoint := providertest.New(providertest.OpenAI, providertest.FailFirst(1, providertest.Status(500), providertest.OK()))
	defer newEndpoint.Close()
	h := newHarness(t)
	old := h.buildProcessor(primaryChainCooling(t, "a", oldEndpoint.URL, "3s"), testSettings())
	old.run()
	for i := range 3 {
		h.ask("a", fmt.Sprintf("old%d", i))
	}
	if _, cooling := old.StoreForTest().Cooling("primary", time.Now()); !cooling {
		t.Fatal("the old definition did not trip primary")
	}

	m := metrics.New()
	p := h.assemble(primaryChain(t, "a", newEndpoint.URL), testSettings(), false, withMetrics(m), service.FleetEveryForTest(50*time.Millisecond))
	p.run()
	circuit := p.StoreForTest().CircuitOf("primary", fleet.Definitions(primaryChain(t, "a", newEndpoint.URL))["primary"].Fingerprint)
	if circuit == "primary" {
		t.Fatalf("the new definition keeps the plain circuit while the old one holds it")
	}
	for i := 0; newEndpoint.Requests() < 3; i++ {
		h.ask("a", fmt.Sprintf("both%d", i))
		if i == 50 {
			t.Fatalf("the new definition's processor took none of 50 requests")
		}
	}
	if got := gathered(t, m, "detour_provider_skips_total", "provider", "primary"); got != 0 {
		t.Errorf("the new definition's processor skipped primary %v times, want never: the old definition's cooldown is not its own", got)
	}
	if health, ok := p.StoreForTest().Health(circuit); !ok || health.ConsecutiveFailures != 0 || health.LastSuccess.IsZero() {
		t.Errorf("%s's health %+v (%v), want its failure reset by its success", circuit, health, ok)
	}
	old.stop()
	eventually(t, 10*time.Second, "the new definition takes primary over", func() bool {
		return p.StoreForTest().CircuitOf("primary", fleet.Definitions(primaryChain(t, "a", newEndpoint.URL))["primary"].Fingerprint) == "primary"
	})
	store := p.StoreForTest()
	if health, ok := store.Health("primary"); ok {
		t.Errorf("primary's health %+v is still there: the old definition's, cleared at the takeover", health)
	}
	if _, cooling := store.Cooling("primary", time.Now()); cooling {
		t.Error("primary still cools down for the old definition")
	}
	eventually(t, 10*time.Second, "the new definition's own circuit is cleared", func() bool {
		return len(store.Circuits("primary")) == 0
	})
	if res := h.ask("a", "after"); res.Provider != "primary" {
		t.Errorf("after the takeover: answered by %q, want primary", res.Provider)
	}
}

// TestStatusShowsCircuitsAndChainConflicts: two processors define primary
// differently and run chain default with different providers. Once the
// first's primary failed, which claims the name for its definition and
// trips it (so that no check that misses the first processor's answer
// takes the name over), the second's /status.json names each
// definition's circuit (the plain name for the first;
// primary=<short fingerprint> for its own), has a row for its own
// circuit, and lists chain default's two lists with their processors; its
// page shows both conflicts (with Chromium at hand). The second checks
// the fleet often, and the snapshot is read until a check has found the
// conflicts: none of this hangs on one check's answers.
func TestStatusShowsCircuitsAndChainConflicts(t *testing.T) {
	failing := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer failing.Close()
	h := newHarness(t)
	chainFile := func(url, chain string) *config.File {
		return parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: primary, type: openai, base_url: %s, model: m, failure_threshold: 1}
  - {name: template, type: rules, default_reply: later}
chains:
  default: %s
`, url, chain))
	}
	firstFile := chainFile(failing.URL, "[primary, template]")
	h.startProcessor(firstFile, testSettings())
	secondFile := chainFile("http://127.0.0.2:1/v1", "[template]")
	second := h.assemble(secondFile, testSettings(), false, withMetrics(metrics.New()), service.FleetEveryForTest(50*time.Millisecond))
	second.run()
	for i := 0; failing.Requests() == 0; i++ {
		h.ask("default", fmt.Sprintf("d%d", i))
		if i == 50 {
			t.Fatal("the first processor took none of 50 requests")
		}
	}
	own := kvstate.DefinitionCircuit("primary", fleet.Definitions(secondFile)["primary"].Fingerprint)
	web := httptestServer(t, second.Processor)
	var snap statuspage.Snapshot
	eventually(t, 10*time.Second, "the second processor's status finds both conflicts, and the first definition holding primary", func() bool {
		holder, _ := second.StoreForTest().Holder("primary")
		snap = statusJSON(t, web)
		return len(snap.Conflicts) == 1 && len(snap.ChainConflicts) == 1 &&
			holder.Fingerprint == fleet.Definitions(firstFile)["primary"].Fingerprint
	})
	circuits := map[string]string{}
	for _, c := range snap.Conflicts {
		for _, d := range c.Definitions {
			circuits[d.BaseURL] = d.Circuit
		}
	}
	if circuits[failing.URL] != "primary" || circuits["http://127.0.0.2:1/v1"] != own {
		t.Errorf("circuits by definition %v, want the first's primary and the second's %s", circuits, own)
	}
	if !slices.ContainsFunc(snap.Providers, func(p statuspage.Provider) bool { return p.Provider == own }) {
		t.Errorf("no row for the second definition's circuit %s: %+v", own, snap.Providers)
	}
	if len(snap.ChainConflicts) != 1 || snap.ChainConflicts[0].Chain != "default" || len(snap.ChainConflicts[0].Lists) != 2 {
		t.Fatalf("chain conflicts %+v, want chain default's two lists", snap.ChainConflicts)
	}
	for _, l := range snap.ChainConflicts[0].Lists {
		if len(l.Processors) != 1 {
			t.Errorf("list %v on %v, want one processor", l.Providers, l.Processors)
		}
	}

	browser := findChromium()
	if browser == "" {
		t.Skip("no Chromium found to render the page")
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1000, 900))...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()
	if err := chromedp.Do(ctx, chromedp.Navigate(web), chromedp.WaitVisible(`p.conflict[data-chain="default"]`)); err != nil {
		t.Fatalf("the page shows no conflict of chain default: %v", err)
	}
	if got := text(t, ctx, `p.conflict[data-chain="default"]`); !strings.Contains(got, "[primary template] on ") || !strings.Contains(got, "[template] on ") {
		t.Errorf("chain conflict %q, want both lists", got)
	}
	if got := text(t, ctx, `p.conflict[data-provider="primary"]`); !strings.Contains(got, "(circuit "+own+")") {
		t.Errorf("provider conflict %q, want the second definition's circuit %s", got, own)
	}
	screenshot(t, ctx, "statuspage-conflicts.png")
}

// TestACircuitNoProcessorRunsIsCleared: a circuit of a definition of
// primary that no running processor announces (its processors stopped)
// is cleared by a processor that runs primary, after two checks; the
// circuit of a definition that runs is kept, with its failures and
// cooldown (a cooling circuit is never cleared, so a check that misses
// its processor's answer costs it nothing), and the holder (whose failure
// came first) keeps the name.
func TestACircuitNoProcessorRunsIsCleared(t *testing.T) {
	failing := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer failing.Close()
	alsoFailing := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer alsoFailing.Close()
	h := newHarness(t)
	every := service.FleetEveryForTest(50 * time.Millisecond)
	holderFile := primaryChain(t, "a", alsoFailing.URL)
	holder := h.assemble(holderFile, testSettings(), false, every)
	holder.run()
	h.ask("a", "a0") // the first failure claims primary for this definition
	h.waitServing("a")
	otherFile := primaryChain(t, "b", failing.URL)
	other := h.assemble(otherFile, testSettings(), false, every)
	other.run()
	for i := range 3 {
		h.ask("b", fmt.Sprintf("b%d", i))
	}
	running := kvstate.DefinitionCircuit("primary", fleet.Definitions(otherFile)["primary"].Fingerprint)
	store := holder.StoreForTest()
	eventually(t, 5*time.Second, "the holder sees the other definition's trip", func() bool {
		health, ok := store.Health(running)
		_, cooling := store.Cooling(running, time.Now())
		return ok && health.ConsecutiveFailures == 3 && cooling
	})

	const gone = "primary=0a0b0c0d"
	kv, err := h.js.KeyValue(context.Background(), kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), kvstate.HealthKey(gone), []byte(`{"consecutive_failures":2,"trips":1,"last_trip":"2026-01-01T00:00:00Z","last_trip_s":60}`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the circuit no processor runs is cleared", func() bool {
		_, ok := store.Health(gone)
		return !ok
	})
	if health, ok := store.Health(running); !ok || health.ConsecutiveFailures != 3 {
		t.Errorf("the running definition's circuit %s: %+v (%v), want its failures kept", running, health, ok)
	}
	if got, _ := store.Holder("primary"); got.Fingerprint != fleet.Definitions(holderFile)["primary"].Fingerprint {
		t.Errorf("primary is held by %+v, want the first definition still: it runs", got)
	}
}
