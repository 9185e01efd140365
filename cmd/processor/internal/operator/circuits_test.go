package operator_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	fleetpkg "github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/cmd/processor/internal/operator"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/kvstate/kvstatetest"
)

// Two definitions of primary, as running processors announce them: the
// first holds the name, the second keeps primary=<its short fingerprint>.
const (
	holderFingerprint = "1111111111111111"
	otherFingerprint  = "2a2b2c2d3e3f4041"
	otherCircuit      = "primary=2a2b2c2d"
)

// twoDefinitions is a bucket in which the first definition holds primary,
// with a processor's mirror following it; fail records an auth failure
// (an hour's cooldown at once) of a circuit.
func twoDefinitions(t *testing.T) (js jetstream.JetStream, processor *kvstate.Store, fail func(circuit string)) {
	t.Helper()
	srv := natstest.Start(t)
	_, js = natstest.Connect(t, srv)
	ctx := context.Background()
	kv, err := kvstate.OpenBucket(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	processor = kvstate.New(js, kv, kvstate.Options{ID: "proc-1"})
	if err := processor.Claim(ctx, "primary", kvstate.Holder{Fingerprint: holderFingerprint, By: "proc-1"}); err != nil {
		t.Fatal(err)
	}
	kvstatetest.Follow(t, ctx, processor)
	return js, processor, func(circuit string) {
		t.Helper()
		err := processor.RecordFailure(ctx, circuit, chain.Failure{Class: chain.ClassAuth, Error: "auth (HTTP 401): invalid key",
			At: time.Now(), CooldownFor: time.Hour, Policy: chain.CooldownPolicy{FailureThreshold: 3, Cooldown: time.Minute, MaxCooldown: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// waitState waits until store sees circuit in want.
func waitState(t *testing.T, store *kvstate.Store, circuit string, want kvstate.CircuitState) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for store.State(circuit, time.Now()) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s, want %s", circuit, store.State(circuit, time.Now()), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestResetNamesEveryCircuitOrOne: `reset primary` resets every circuit
// of the name with state, the plain one and another definition's, one line
// each; `reset primary=<short>` resets that circuit alone.
func TestResetNamesEveryCircuitOrOne(t *testing.T) {
	js, processor, fail := twoDefinitions(t)
	ctx := context.Background()
	f := fleet(t)
	f.JS = js
	fail("primary")
	fail(otherCircuit)
	waitState(t, processor, otherCircuit, kvstate.StateOpen)

	results, err := f.Reset(ctx, []string{otherCircuit})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Provider != otherCircuit || !results[0].Done {
		t.Fatalf("reset %s: %+v, want that circuit reset alone", otherCircuit, results)
	}
	waitState(t, processor, otherCircuit, kvstate.StateClosed)
	if processor.State("primary", time.Now()) != kvstate.StateOpen {
		t.Errorf("reset %s ended the plain circuit's cooldown too", otherCircuit)
	}

	// A failure timed before the reset would count for nothing.
	for h, _ := processor.Health(otherCircuit); !time.Now().After(h.ResetAt); h, _ = processor.Health(otherCircuit) {
		time.Sleep(time.Millisecond)
	}
	fail(otherCircuit)
	waitState(t, processor, otherCircuit, kvstate.StateOpen)
	results, err = f.Reset(ctx, []string{"primary"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := operator.WriteReset(&out, results); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "primary: reset: was open") || !strings.HasPrefix(lines[1], otherCircuit+": reset: was open") {
		t.Errorf("reset primary printed:\n%s\nwant a reset line for primary, then for %s", out.String(), otherCircuit)
	}
	for _, c := range []string{"primary", otherCircuit} {
		waitState(t, processor, c, kvstate.StateClosed)
	}
	if err := f.CheckReset([]string{"primary=xyz"}); err == nil || !strings.Contains(err.Error(), "neither a provider name nor a provider's circuit") {
		t.Errorf("reset primary=xyz: %v, want it refused", err)
	}
	if err := f.CheckReset([]string{"primay=2a2b2c2d"}); err == nil || !strings.Contains(err.Error(), `did you mean "primary"?`) {
		t.Errorf("reset primay=2a2b2c2d: %v, want the provider's name suggested", err)
	}
}

// TestTripOpensEveryDefinitionsCircuit: `trip primary` opens the plain
// circuit and the circuit of every definition a running processor keeps,
// although that one has no state yet; `trip primary=<short>` opens that
// one alone.
func TestTripOpensEveryDefinitionsCircuit(t *testing.T) {
	js, processor, _ := twoDefinitions(t)
	ctx := context.Background()
	f := fleet(t)
	f.JS = js
	f.Running = []fleetpkg.Instance{
		{Processor: "proc-1", Providers: map[string]fleetpkg.Definition{"primary": {Fingerprint: holderFingerprint}}},
		{Processor: "proc-2", Providers: map[string]fleetpkg.Definition{"primary": {Fingerprint: otherFingerprint}}},
	}
	res, err := f.Trip(ctx, "primary", time.Minute, "vendor maintenance")
	if err != nil {
		t.Fatal(err)
	}
	if res.Provider != "primary" || !res.Opened || len(res.Others) != 1 || res.Others[0].Provider != otherCircuit || !res.Others[0].Opened {
		t.Fatalf("trip primary: %+v, want primary and %s opened", res, otherCircuit)
	}
	var out bytes.Buffer
	if err := operator.WriteTrip(&out, res); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], otherCircuit+": tripped by alice@host") {
		t.Errorf("trip primary printed:\n%s\nwant a line for primary, then for %s", out.String(), otherCircuit)
	}
	for _, c := range []string{"primary", otherCircuit} {
		waitState(t, processor, c, kvstate.StateOpen)
	}

	if _, err := f.Reset(ctx, []string{"primary"}); err != nil {
		t.Fatal(err)
	}
	res, err = f.Trip(ctx, otherCircuit, time.Minute, "their endpoint only")
	if err != nil {
		t.Fatal(err)
	}
	if res.Provider != otherCircuit || !res.Opened || len(res.Others) != 0 {
		t.Fatalf("trip %s: %+v, want it alone opened", otherCircuit, res)
	}
	waitState(t, processor, otherCircuit, kvstate.StateOpen)
	if processor.State("primary", time.Now()) != kvstate.StateClosed {
		t.Errorf("trip %s opened the plain circuit too", otherCircuit)
	}
}

// TestATripBeforeAnyClaimCoolsEveryDefinition: no definition holds
// primary yet, and the running processors announce two: `trip primary`
// opens the plain circuit and each definition's own, so that whichever
// definition's first failure then claims the name, the other, which moves
// to its own circuit, is cooling too.
func TestATripBeforeAnyClaimCoolsEveryDefinition(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	ctx := context.Background()
	kv, err := kvstate.OpenBucket(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	processor := kvstate.New(js, kv, kvstate.Options{ID: "proc-1"})
	kvstatetest.Follow(t, ctx, processor)
	f := fleet(t)
	f.JS = js
	f.Running = []fleetpkg.Instance{
		{Processor: "proc-1", Providers: map[string]fleetpkg.Definition{"primary": {Fingerprint: holderFingerprint}}},
		{Processor: "proc-2", Providers: map[string]fleetpkg.Definition{"primary": {Fingerprint: otherFingerprint}}},
	}
	res, err := f.Trip(ctx, "primary", time.Minute, "vendor maintenance")
	if err != nil {
		t.Fatal(err)
	}
	var others []string
	for _, o := range res.Others {
		others = append(others, o.Provider)
	}
	if want := []string{"primary=11111111", otherCircuit}; !res.Opened || !slices.Equal(others, want) {
		t.Fatalf("trip primary: opened %v, others %v; want primary and %v", res.Opened, others, want)
	}
	// The first failure claims the name for the first definition.
	if err := processor.Claim(ctx, "primary", kvstate.Holder{Fingerprint: holderFingerprint, By: "proc-1"}); err != nil {
		t.Fatal(err)
	}
	for _, fp := range []string{holderFingerprint, otherFingerprint} {
		waitState(t, processor, processor.CircuitOf("primary", fp), kvstate.StateOpen)
	}
}

// TestATripUnderAHolderWithoutAFingerprint: a .definition whose
// fingerprint is none holds primary for a definition no processor runs,
// so every running definition keeps a circuit of its own
// (kvstate.Store.CircuitOf): `trip primary` opens each of them.
func TestATripUnderAHolderWithoutAFingerprint(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	ctx := context.Background()
	kv, err := kvstate.OpenBucket(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, kvstate.DefinitionKey("primary"), []byte(`{"fingerprint":"not hex","by":"x"}`)); err != nil {
		t.Fatal(err)
	}
	processor := kvstate.New(js, kv, kvstate.Options{ID: "proc-1"})
	kvstatetest.Follow(t, ctx, processor)
	f := fleet(t)
	f.JS = js
	f.Running = []fleetpkg.Instance{
		{Processor: "proc-1", Providers: map[string]fleetpkg.Definition{"primary": {Fingerprint: holderFingerprint}}},
		{Processor: "proc-2", Providers: map[string]fleetpkg.Definition{"primary": {Fingerprint: otherFingerprint}}},
	}
	if _, err := f.Trip(ctx, "primary", time.Minute, "vendor maintenance"); err != nil {
		t.Fatal(err)
	}
	for _, fp := range []string{holderFingerprint, otherFingerprint} {
		c := processor.CircuitOf("primary", fp)
		if c == "primary" {
			t.Fatalf("definition %s keeps the plain circuit under a holder without a fingerprint", fp)
		}
		waitState(t, processor, c, kvstate.StateOpen)
	}
}
