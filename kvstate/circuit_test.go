package kvstate_test

import (
	"slices"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/kvstate"
)

// TestCircuitNames: the holder of a name and a name no one holds keep the
// plain circuit; another definition, and every definition while a holder
// without a fingerprint holds the name (for a definition no processor
// runs), keeps provider=<the first 8 hex digits of its fingerprint>, which
// SplitCircuit reads back, and which no provider name can be.
func TestCircuitNames(t *testing.T) {
	const mine, theirs = "0123456789abcdef", "fedcba9876543210"
	for _, tc := range []struct {
		holder string
		held   bool
		want   string
	}{{"", false, "primary"}, {mine, true, "primary"}, {theirs, true, "primary=01234567"}, {"", true, "primary=01234567"}} {
		if got := kvstate.Circuit("primary", mine, kvstate.Holder{Fingerprint: tc.holder}, tc.held); got != tc.want {
			t.Errorf("Circuit(primary, %s, held by %q: %v) = %q, want %q", mine, tc.holder, tc.held, got, tc.want)
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
	// The winner's processors have written the plain circuit's health
	// since: the stale store must not delete it.
	fresh4 := `{"consecutive_failures":1,"last_class":"server","last_failure":"2026-01-01T00:00:00Z"}`
	if _, err := e.kv.Put(e.ctx, kvstate.HealthKey("primary"), []byte(fresh4)); err != nil {
		t.Fatal(err)
	}
	if took, err := stale.TakeOver(e.ctx, "primary", kvstate.Holder{Fingerprint: fo, By: "stale"}); err != nil || took {
		t.Errorf("a take-over from a holder replaced meanwhile: %v, %v; want false", took, err)
	}
	if _, err := e.kv.Get(e.ctx, kvstate.HealthKey("primary")); err != nil {
		t.Errorf("the winner's health of primary: %v, want it kept by a take-over that lost", err)
	}
	if h, _ := stale.Holder("primary"); h.Fingerprint != "0000000000000004" {
		t.Errorf("after losing, the stale store's mirror holds %+v, want the holder it read", h)
	}
}

// TestALosingClaimLearnsTheHolder: a claim that finds another holder puts
// that holder in the mirror at once, before any watch delivers it, so the
// failure recorded next goes to the definition's own circuit.
func TestALosingClaimLearnsTheHolder(t *testing.T) {
	e := setup(t)
	late := kvstate.New(e.js, e.kv, kvstate.Options{ID: "late"}) // loaded, not followed
	if err := late.Load(e.ctx); err != nil {
		t.Fatal(err)
	}
	first := e.store(t, "first", nil)
	const ff, fl = "ffffffffffffffff", "1111111111111111"
	if err := first.Claim(e.ctx, "primary", kvstate.Holder{Fingerprint: ff, By: "first"}); err != nil {
		t.Fatal(err)
	}
	if err := late.Claim(e.ctx, "primary", kvstate.Holder{Fingerprint: fl, By: "late"}); err != nil {
		t.Fatal(err)
	}
	if h, ok := late.Holder("primary"); !ok || h.Fingerprint != ff {
		t.Errorf("after a losing claim the mirror holds %+v (%v), want the first holder", h, ok)
	}
	if got := late.CircuitOf("primary", fl); got != "primary=11111111" {
		t.Errorf("the losing definition keeps %q, want primary=11111111", got)
	}
}

// TestAClaimRecreatesAGoneBucket: a claim that finds the bucket deleted
// creates it again, as a health write does, and claims on the new one.
func TestAClaimRecreatesAGoneBucket(t *testing.T) {
	e := setup(t)
	s := e.store(t, "a", nil)
	if err := e.js.DeleteKeyValue(e.ctx, kvstate.Bucket); err != nil {
		t.Fatal(err)
	}
	const fa = "aaaaaaaaaaaaaaaa"
	if err := s.Claim(e.ctx, "primary", kvstate.Holder{Fingerprint: fa, By: "a"}); err != nil {
		t.Fatalf("Claim with the bucket gone: %v", err)
	}
	kv, err := e.js.KeyValue(e.ctx, kvstate.Bucket)
	if err != nil {
		t.Fatalf("the bucket is still gone: %v", err)
	}
	if _, err := kv.Get(e.ctx, kvstate.DefinitionKey("primary")); err != nil {
		t.Errorf("primary.definition in the new bucket: %v", err)
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
