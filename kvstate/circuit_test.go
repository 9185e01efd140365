package kvstate_test

import (
	"slices"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/kvstate"
)

// TestCircuitNames: the holder of a name and a name no one holds keep the
// plain circuit; another definition keeps provider=<the first 8 hex
// digits of its fingerprint>, which SplitCircuit reads back, and which no
// provider name can be.
func TestCircuitNames(t *testing.T) {
	const mine, theirs = "0123456789abcdef", "fedcba9876543210"
	for _, tc := range []struct{ holder, want string }{{"", "primary"}, {mine, "primary"}, {theirs, "primary=01234567"}} {
		if got := kvstate.Circuit("primary", mine, tc.holder); got != tc.want {
			t.Errorf("Circuit(primary, %s, held by %q) = %q, want %q", mine, tc.holder, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name, provider, short string
		ok                    bool
	}{
		{"primary", "primary", "", true},
		{"primary=01234567", "primary", "01234567", true},
		{"primary=0123456", "primary", "0123456", false},
		{"primary=0123456G", "primary", "0123456G", false},
		{"=01234567", "", "01234567", false},
	} {
		provider, short, ok := kvstate.SplitCircuit(tc.name)
		if provider != tc.provider || short != tc.short || ok != tc.ok {
			t.Errorf("SplitCircuit(%q) = %q, %q, %v; want %q, %q, %v", tc.name, provider, short, ok, tc.provider, tc.short, tc.ok)
		}
	}
	if got := kvstate.CircuitProvider("primary=01234567"); got != "primary" {
		t.Errorf("CircuitProvider = %q", got)
	}
}

// TestTheFirstClaimHoldsTheName: two stores claim primary for different
// definitions; the first holds it, for both mirrors, and the second keeps
// a circuit of its own. A holder whose fingerprint is none holds the name
// for a definition no processor runs; one the bucket holds unreadable is
// replaced by a claim.
func TestTheFirstClaimHoldsTheName(t *testing.T) {
	e := setup(t)
	a, b := e.store(t, "a", nil), e.store(t, "b", nil)
	const fa, fb = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	if err := a.Claim(e.ctx, "primary", kvstate.Holder{Fingerprint: fa, By: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Claim(e.ctx, "primary", kvstate.Holder{Fingerprint: fb, By: "b"}); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*kvstate.Store{"a": a, "b": b} {
		eventually(t, 5*time.Second, name+" knows a holds primary", func() bool {
			h, ok := s.Holder("primary")
			return ok && h.Fingerprint == fa && h.By == "a"
		})
	}
	if got := b.CircuitOf("primary", fb); got != "primary=bbbbbbbb" {
		t.Errorf("b's definition keeps %q, want primary=bbbbbbbb", got)
	}
	if got := a.CircuitOf("primary", fa); got != "primary" {
		t.Errorf("a's definition keeps %q, want primary", got)
	}

	if _, err := e.kv.Put(e.ctx, kvstate.DefinitionKey("economy"), []byte(`{"fingerprint":"not hex","by":"x"}`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a holder without a fingerprint holds economy for no one", func() bool {
		h, ok := b.Holder("economy")
		return ok && h.Fingerprint == "" && b.CircuitOf("economy", fb) == "economy=bbbbbbbb"
	})

	if _, err := e.kv.Put(e.ctx, kvstate.DefinitionKey("backup"), []byte("not json")); err != nil {
		t.Fatal(err)
	}
	if err := b.Claim(e.ctx, "backup", kvstate.Holder{Fingerprint: fb, By: "b"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "b's claim replaces the unreadable holder", func() bool {
		h, ok := a.Holder("backup")
		return ok && h.Fingerprint == fb
	})
}

// TestTakeOverClearsTheOldDefinitionsCircuit: a definition that takes the
// name over clears the plain circuit's health, cooldown and probe (the old
// definition's), and holds the name, for every mirror; a take-over from a
// holder that changed meanwhile does nothing.
func TestTakeOverClearsTheOldDefinitionsCircuit(t *testing.T) {
	e := setup(t)
	old, fresh := e.store(t, "old", nil), e.store(t, "new", nil)
	const fo, fn = "0000000000000001", "0000000000000002"
	if err := old.Claim(e.ctx, "primary", kvstate.Holder{Fingerprint: fo, By: "old"}); err != nil {
		t.Fatal(err)
	}
	f := chain.Failure{Class: chain.ClassServer, Error: "server (HTTP 503)", At: time.Now(), Policy: policy(1, time.Minute)}
	if err := old.RecordFailure(e.ctx, "primary", f); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the new definition's store sees the old one's cooldown", func() bool {
		_, cooling := fresh.Cooling("primary", time.Now())
		return cooling && fresh.CircuitOf("primary", fn) == "primary=00000000"
	})
	took, err := fresh.TakeOver(e.ctx, "primary", kvstate.Holder{Fingerprint: fn, By: "new"})
	if err != nil || !took {
		t.Fatalf("TakeOver: %v, %v", took, err)
	}
	for name, s := range map[string]*kvstate.Store{"old": old, "new": fresh} {
		eventually(t, 5*time.Second, name+" sees the plain circuit cleared and held by the new definition", func() bool {
			_, cooling := s.Cooling("primary", time.Now())
			_, health := s.Health("primary")
			h, _ := s.Holder("primary")
			return !cooling && !health && h.Fingerprint == fn && len(s.Circuits("primary")) == 0
		})
	}
	for _, key := range []string{kvstate.HealthKey("primary"), kvstate.CooldownKey("primary")} {
		if _, err := e.kv.Get(e.ctx, key); err == nil {
			t.Errorf("%s is still in the bucket", key)
		}
	}

	// A store whose mirror holds a holder replaced since takes nothing
	// over.
	if _, err := e.kv.Put(e.ctx, kvstate.DefinitionKey("primary"), []byte(`{"fingerprint":"0000000000000003","by":"third"}`)); err != nil {
		t.Fatal(err)
	}
	stale := kvstate.New(e.js, e.kv, kvstate.Options{ID: "stale"})
	if err := stale.Load(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kv.Put(e.ctx, kvstate.DefinitionKey("primary"), []byte(`{"fingerprint":"0000000000000004","by":"fourth"}`)); err != nil {
		t.Fatal(err)
	}
	if took, err := stale.TakeOver(e.ctx, "primary", kvstate.Holder{Fingerprint: fo, By: "stale"}); err != nil || took {
		t.Errorf("a take-over from a holder replaced meanwhile: %v, %v; want false", took, err)
	}
}

// TestStatusListsEachDefinitionsCircuit: the status rows hold the
// circuits of other definitions, each after its provider's plain one.
func TestStatusListsEachDefinitionsCircuit(t *testing.T) {
	e := setup(t)
	s := e.store(t, "a", nil)
	f := chain.Failure{Class: chain.ClassServer, Error: "server (HTTP 503)", At: time.Now(), Policy: policy(3, time.Minute)}
	for _, c := range []string{"primary=0a0b0c0d", "primary-2", "primary"} {
		if err := s.RecordFailure(e.ctx, c, f); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, r := range s.Status(time.Now(), "backup") {
		names = append(names, r.Provider)
	}
	if want := []string{"backup", "primary", "primary=0a0b0c0d", "primary-2"}; !slices.Equal(names, want) {
		t.Errorf("status rows %v, want %v", names, want)
	}
	if got := s.Circuits("primary"); !slices.Equal(got, []string{"primary", "primary=0a0b0c0d"}) {
		t.Errorf("Circuits(primary) = %v", got)
	}
	if err := s.Clear(e.ctx, "primary=0a0b0c0d"); err != nil {
		t.Fatal(err)
	}
	if got := s.Circuits("primary"); !slices.Equal(got, []string{"primary"}) {
		t.Errorf("after Clear, Circuits(primary) = %v", got)
	}
}
