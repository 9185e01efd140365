package chain_test

import (
	"encoding/json"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/chain"
)

// TestClassifyStatusFollowsDesignTable checks the table of docs/failures.md row by row: which
// class an HTTP status gets, whether it is retried on the same provider, and
// whether it counts toward the provider's cooldown.
func TestClassifyStatusFollowsDesignTable(t *testing.T) {
	tests := []struct {
		status    int
		class     chain.Class
		retryable bool
		counts    bool
	}{
		// request: a bug of ours or the caller's, not an outage.
		{400, chain.ClassRequest, false, false},
		{413, chain.ClassRequest, false, false},
		{422, chain.ClassRequest, false, false},
		// auth: not retried, but counted: it opens auth_cooldown at once.
		{401, chain.ClassAuth, false, true},
		// A bare 402, 403 or 404 says too little to cool at once: it is
		// retried and counted like a server failure (its body may say more).
		{402, chain.ClassServer, true, true},
		{403, chain.ClassServer, true, true},
		{404, chain.ClassServer, true, true},
		{408, chain.ClassTimeout, true, true},
		{429, chain.ClassRateLimit, true, true},
		{500, chain.ClassServer, true, true},
		{502, chain.ClassServer, true, true},
		{503, chain.ClassServer, true, true},
		{504, chain.ClassServer, true, true},
		{529, chain.ClassServer, true, true},
	}
	for _, tt := range tests {
		got := chain.Classify(tt.status)
		if got != tt.class {
			t.Errorf("Classify(%d) = %v, want %v", tt.status, got, tt.class)
		}
		if got.Retryable() != tt.retryable {
			t.Errorf("Classify(%d).Retryable() = %v, want %v", tt.status, got.Retryable(), tt.retryable)
		}
		if got.Counts() != tt.counts {
			t.Errorf("Classify(%d).Counts() = %v, want %v", tt.status, got.Counts(), tt.counts)
		}
	}
}

// TestNonHTTPClassesAreNeitherRetriedNorCounted covers the classes that no
// status produces: a bad answer, a shutdown and a skip are not outages.
func TestNonHTTPClassesAreNeitherRetriedNorCounted(t *testing.T) {
	for _, c := range []chain.Class{chain.ClassNone, chain.ClassInvalidOutput, chain.ClassCanceled, chain.ClassCooldown} {
		if c.Retryable() || c.Counts() {
			t.Errorf("%q: Retryable() = %v, Counts() = %v; want both false", c, c.Retryable(), c.Counts())
		}
	}
	for _, c := range []chain.Class{chain.ClassNetwork, chain.ClassTimeout} {
		if !c.Retryable() || !c.Counts() {
			t.Errorf("%q: Retryable() = %v, Counts() = %v; want both true", c, c.Retryable(), c.Counts())
		}
	}
}

var allClasses = []struct {
	class chain.Class
	name  string
}{
	{chain.ClassNone, ""},
	{chain.ClassServer, "server"},
	{chain.ClassTimeout, "timeout"},
	{chain.ClassRateLimit, "rate_limit"},
	{chain.ClassNetwork, "network"},
	{chain.ClassAuth, "auth"},
	{chain.ClassRequest, "request"},
	{chain.ClassInvalidOutput, "invalid_output"},
	{chain.ClassCanceled, "canceled"},
	{chain.ClassCooldown, "cooldown"},
}

func TestClassTextRoundTripUsesWireNames(t *testing.T) {
	for _, tt := range allClasses {
		text, err := tt.class.MarshalText()
		if err != nil {
			t.Fatalf("%v.MarshalText: %v", tt.class, err)
		}
		if string(text) != tt.name || tt.class.String() != tt.name {
			t.Errorf("class %d: MarshalText = %q, String = %q; want %q", int(tt.class), text, tt.class.String(), tt.name)
		}
		var back chain.Class
		if err := back.UnmarshalText(text); err != nil || back != tt.class {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", text, back, err, tt.class)
		}
	}
}

func TestClassUnmarshalTextRejectsUnknownName(t *testing.T) {
	var c chain.Class
	if err := c.UnmarshalText([]byte("overloaded")); err == nil {
		t.Errorf("UnmarshalText(overloaded) = nil error, class %v", c)
	}
}

func TestClassJSONRoundTripIsAString(t *testing.T) {
	for _, tt := range allClasses {
		b, err := json.Marshal(tt.class)
		if err != nil {
			t.Fatalf("json.Marshal(%v): %v", tt.class, err)
		}
		want, _ := json.Marshal(tt.name)
		if string(b) != string(want) {
			t.Errorf("json.Marshal(%v) = %s, want %s", tt.class, b, want)
		}
		var back chain.Class
		if err := json.Unmarshal(b, &back); err != nil || back != tt.class {
			t.Errorf("json.Unmarshal(%s) = %v, %v; want %v", b, back, err, tt.class)
		}
	}
}

// TestClassMsgpackRoundTripIsAString makes sure a non-Go client decoding a
// result sees the class as a string, not as binary or an integer.
func TestClassMsgpackRoundTripIsAString(t *testing.T) {
	for _, tt := range allClasses {
		b, err := msgpack.Marshal(tt.class)
		if err != nil {
			t.Fatalf("msgpack.Marshal(%v): %v", tt.class, err)
		}
		var generic any
		if err := msgpack.Unmarshal(b, &generic); err != nil {
			t.Fatalf("msgpack.Unmarshal(%v) into any: %v", tt.class, err)
		}
		if s, ok := generic.(string); !ok || s != tt.name {
			t.Errorf("msgpack of %v decodes as %T %v, want string %q", tt.class, generic, generic, tt.name)
		}
		var back chain.Class
		if err := msgpack.Unmarshal(b, &back); err != nil || back != tt.class {
			t.Errorf("msgpack.Unmarshal into Class = %v, %v; want %v", back, err, tt.class)
		}
	}
}

// TestAttemptMsgpackCarriesClassName checks the class inside the struct that
// actually travels, with its omitempty tag.
func TestAttemptMsgpackCarriesClassName(t *testing.T) {
	b, err := msgpack.Marshal(chain.Attempt{Provider: "primary", Outcome: chain.OutcomeFailed, Class: chain.ClassRateLimit})
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := msgpack.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	if generic["class"] != "rate_limit" {
		t.Errorf(`attempt["class"] = %#v, want "rate_limit"`, generic["class"])
	}
	var back chain.Attempt
	if err := msgpack.Unmarshal(b, &back); err != nil || back.Class != chain.ClassRateLimit {
		t.Errorf("round trip: class %v, err %v", back.Class, err)
	}
}
